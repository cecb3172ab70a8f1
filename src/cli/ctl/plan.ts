import type { Command } from 'commander';

import type { PlanAnswer, PlanOption } from '../../planner/index.js';
import { stringOpt, type Runner } from '../command.js';
import { emit, table } from '../output.js';
import { UsageError } from '../usage-error.js';

import { connect } from './connection.js';
import { readDefinition } from './models.js';

/** A reason longer than this is cut in the table; --json has it whole. */
const REASON_WIDTH = 96;

export function registerPlan(ctl: Command, run: Runner): void {
  ctl
    .command('plan')
    .argument('[model]', 'a model of the catalog')
    .option('-f, --file <file>', 'a model definition, as model add -f takes it (- reads standard input)')
    .option('--source <source>', 'a source: hf://ORG/REPO, hf://ORG/REPO/FILE.gguf, a URL or a path')
    .option(
      '--context <tokens>',
      "the context to plan for (default: the model's context_length, else its trained one)",
    )
    .option('--class <classes>', "device classes, comma separated (default: the cluster's): l4-24g,a100-80g")
    .description(
      'whether a model fits, before anything is downloaded: each profile and each engine on each device class at the fewest cards, the memory a card needs, the largest context that fits, and why not; best first',
    )
    .action(
      run.action(async ({ opts, o, conn }, ...args: string[]) => {
        const model = args[0];
        const file = stringOpt(opts, 'file');
        const source = stringOpt(opts, 'source');
        const given = [model, file, source].filter((x) => x !== undefined).length;
        if (given !== 1) {
          throw new UsageError(
            `name one thing to plan: a model of the catalog (llmgw ctl plan MODEL), a definition (-f FILE) or a source (--source hf://ORG/REPO)${given > 1 ? `, not ${given}` : ''}`,
          );
        }
        const answer = await connect(conn).plan({
          model,
          spec: file === undefined ? undefined : readDefinition(file),
          source,
          context: contextOpt(stringOpt(opts, 'context')),
          classes: classesOpt(stringOpt(opts, 'class')),
        });
        emit(o, answer, planText);
      }),
    );
}

function contextOpt(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < 256)
    throw new UsageError(`--context takes a number of tokens from 256, such as 32768 (got "${text}")`);
  return Number(text);
}

function classesOpt(text: string | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  const names = text
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
  if (names.length === 0)
    throw new UsageError('--class takes device classes, comma separated: l4-24g,a100-80g');
  return names;
}

const num = (v: number | null, digits = 1) => (v === null ? '-' : v.toFixed(digits));

export function planText(a: PlanAnswer): string {
  const head = `${a.model}${a.context === null ? '' : ` at ${a.context} tokens`}: per card, GiB`;
  if (a.options.length === 0)
    return (
      `${head}\nNo engine runs these weights on the classes asked about: original weights (safetensors) ` +
      'run on vLLM, SGLang and TensorRT-LLM, on GPUs only. Name GPU classes (--class l4-24g,a100-80g), ' +
      'or plan a GGUF file, which llama.cpp also runs on CPUs.'
    );
  const rows = a.options.map((p: PlanOption) => [
    p.profile ?? '-',
    p.engine,
    p.class,
    p.class === 'cpu' ? '-' : String(p.cards),
    p.fits ? 'yes' : 'no',
    num(p.need_gib),
    num(p.budget_gib),
    num(p.weights_gib),
    num(p.kv_gib),
    p.max_context === null ? '-' : String(p.max_context),
    p.reason === null ? '' : cut(p.reason),
  ]);
  const lines = [
    head,
    table(
      [
        'PROFILE',
        'ENGINE',
        'CLASS',
        'CARDS',
        'FITS',
        'NEED/CARD',
        'BUDGET',
        'WEIGHTS',
        'KV',
        'MAX CONTEXT',
        'REASON',
      ],
      rows,
    ),
  ];
  if (a.options.some((p) => p.reason !== null && p.reason.length > REASON_WIDTH))
    lines.push('(--json gives each reason in full)');
  return lines.join('\n');
}

/** The start and the end of a long reason, at spaces: the end says what to do (a shorter context, more cards). */
function cut(text: string): string {
  if (text.length <= REASON_WIDTH) return text;
  const head = text.slice(0, 32).replace(/\s+\S*$/, '');
  const tail = text.slice(text.length - (REASON_WIDTH - head.length - 3)).replace(/^\S*\s+/, '');
  return `${head} … ${tail}`;
}
