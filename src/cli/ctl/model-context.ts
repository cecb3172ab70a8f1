import type { Command } from 'commander';

import { knownEngine } from '../../engines/registry.js';
import type { ContextProfileChange, ProfileMemory } from '../../planner/change-context.js';
import type {
  ContextBody,
  ContextChangeCheck,
  ContextChangeView,
} from '../../server/services/model-context.js';
import { stringOpt, type Runner } from '../command.js';
import { emit } from '../output.js';
import { UsageError } from '../usage-error.js';

import { connect } from './connection.js';
import { dryRunLines, rollingLines } from './rollout-text.js';

/** `llmgw ctl model context MODEL TOKENS [--slots N] [--in-place] [--dry-run]`, under `ctl model`. */
export function registerModelContext(model: Command, run: Runner): void {
  model
    .command('context')
    .argument('<name>', 'the model')
    .argument('<tokens>', 'tokens one request may use, e.g. 32768')
    .option('--slots <n>', "llama.cpp's requests at once, each with the whole context (1 to 64)")
    .option('--in-place', 'stop each replica before its successor starts (when there is no room beside it)')
    .option('--dry-run', 'check the change, room for its replicas included, and store or restart nothing')
    .description(
      "change a model's context: its context_length, each profile's engine arguments and the memory they need, checked against its cards; its replicas then start again on it, one by one",
    )
    .action(
      run.action(async ({ opts, o, conn }, name: string, tokens: string) => {
        const body = {
          ...contextRequest(tokens, stringOpt(opts, 'slots'), opts['inPlace'] === true),
          ...(opts['dryRun'] === true ? { dry_run: true } : {}),
        };
        const path = `/models/${encodeURIComponent(name)}/context`;
        const answer = await connect(conn).request<ContextChangeView | ContextChangeCheck>('POST', path, {
          json: body,
        });
        emit(o, answer.body, contextText);
      }),
    );
}

/** The request from the command line: numbers as numbers, ranges left to the server, which says why. */
export function contextRequest(tokens: string, slots: string | undefined, inPlace: boolean): ContextBody {
  if (!/^\d+$/.test(tokens))
    throw new UsageError(
      `TOKENS is a whole number of tokens one request may use, such as 32768 (got "${tokens}")`,
    );
  if (slots !== undefined && !/^\d+$/.test(slots))
    throw new UsageError(`--slots is a whole number of requests at once, 1 to 64 (got "${slots}")`);
  return {
    tokens: Number(tokens),
    ...(slots === undefined ? {} : { slots: Number(slots) }),
    ...(inPlace ? { in_place: true } : {}),
  };
}

export function contextText(v: ContextChangeView | ContextChangeCheck): string {
  const trained = v.trained === null ? '' : ` (trained for ${v.trained})`;
  const lines = [
    `model "${v.model}": context ${v.before ?? 'default'} → ${v.after} tokens${trained}`,
    `max output: ${v.max_output ?? 'unset (the rest of the context)'}`,
  ];
  for (const p of v.profiles) lines.push(...profileLines(p));
  lines.push(...('rollout' in v ? rollingLines(v.rollout) : dryRunLines(v.restarted)));
  if (v.note !== undefined) lines.push(`note: ${v.note}`);
  return lines.join('\n');
}

function profileLines(p: ContextProfileChange): string[] {
  const where = p.class === 'cpu' ? 'CPUs' : p.class;
  const mem = (m: ProfileMemory | null) => m?.words ?? 'not counted';
  const lines = [
    `profile ${p.profile} (${knownEngine(p.engine)?.label ?? p.engine} on ${where}): ${mem(p.before)} → ${mem(p.after)}`,
    `  args: ${p.args.join(' ')}`,
  ];
  if (p.min_memory_gb !== undefined) lines.push(`  min_memory_gb: ${p.min_memory_gb}`);
  return lines;
}
