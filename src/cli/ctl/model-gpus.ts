import type { Command } from 'commander';

import { knownEngine } from '../../engines/registry.js';
import { MAX_GPUS } from '../../planner/index.js';
import type { GpusSideView, ModelGpusCheck, ModelGpusView } from '../../protocol/model-gpus-views.js';
import { stringOpt, type Runner } from '../command.js';
import { emit } from '../output.js';
import { UsageError } from '../usage-error.js';

import { connect } from './connection.js';
import { dryRunLines, rollingLines } from './rollout-text.js';

/** `llmgw ctl model gpus MODEL N [--profile P] [--in-place] [--dry-run]`: the cards of a node each replica uses. */
export function registerModelGpus(model: Command, run: Runner): void {
  model
    .command('gpus')
    .argument('<name>', 'the model')
    .argument('<count>', 'cards of one node each replica uses')
    .option('--profile <profile>', 'the profile to change, when the model has several on GPUs')
    .option('--in-place', 'stop each replica before its successor starts (when there is no room beside it)')
    .option('--dry-run', 'check the change, room for its replicas included, and store or restart nothing')
    .description(
      'how many cards of one node each replica uses: tensor parallel for vLLM, SGLang and TensorRT-LLM, the layers split for llama.cpp; checked against the nodes and what the cards hold, then the replicas start again on them',
    )
    .action(
      run.action(async ({ opts, o, conn }, name: string, count: string) => {
        const gpus = gpusCount(count);
        const profile = stringOpt(opts, 'profile');
        const answer = await connect(conn).request<ModelGpusView | ModelGpusCheck>(
          'POST',
          `/models/${encodeURIComponent(name)}/gpus`,
          {
            json: {
              gpus,
              ...(profile === undefined ? {} : { profile }),
              in_place: opts['inPlace'] === true,
              ...(opts['dryRun'] === true ? { dry_run: true } : {}),
            },
          },
        );
        emit(o, answer.body, gpusText);
      }),
    );
}

/** The count as typed: a whole number of cards from 1. */
export function gpusCount(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_GPUS)
    throw new UsageError(
      `the count is a whole number of cards from 1 to ${MAX_GPUS}, such as 2 (got "${text}")`,
    );
  return n;
}

/** `1 → 2 cards a replica, tensor parallel 1 → 2`; llama.cpp splits the layers, not tensors. */
function split(p: ModelGpusView['profiles'][number]): string {
  const { before: b, after: a } = p;
  const cards = `${b.cards} → ${a.cards} card${a.cards === 1 ? '' : 's'} of a node a replica`;
  if (knownEngine(p.engine)?.split === 'layer') return `${cards}, its layers split over them`;
  const pipeline = b.pp > 1 || a.pp > 1 ? `, pipeline ${b.pp} → ${a.pp}` : '';
  return `${cards}, tensor parallel ${b.tp} → ${a.tp}${pipeline}`;
}

function memory(s: GpusSideView): string {
  if (s.need_gib === null || s.budget_gib === null) return 'not checked';
  const fits = s.fits === null ? '' : s.fits ? ', fits' : ', does not fit';
  return `${s.need_gib.toFixed(1)} of ${s.budget_gib.toFixed(1)} GiB${fits}`;
}

export function gpusText(v: ModelGpusView | ModelGpusCheck): string {
  const lines: string[] = [];
  for (const p of v.profiles) {
    lines.push(
      `model "${v.model}", profile "${p.profile}" (${p.engine} on ${p.class}): ${split(p)}`,
      `  need a card: ${memory(p.before)} → ${memory(p.after)}`,
    );
    if (p.dropped_args.length > 0) lines.push(`  left out of its args: ${p.dropped_args.join(' ')}`);
  }
  lines.push(...('rollout' in v ? rollingLines(v.rollout) : dryRunLines(v.restarted)));
  if (v.note !== null) lines.push(`Note: ${v.note}`);
  return lines.join('\n');
}
