import type { Command } from 'commander';

import { percentDone, progressText } from '../../protocol/cache-views.js';
import type { ReplicaView } from '../../protocol/replica-views.js';
import { stringOpt, type Runner } from '../command.js';
import { age, emit, table } from '../output.js';
import { UsageError } from '../usage-error.js';

import { connect } from './connection.js';

export function registerReplicas(ctl: Command, run: Runner): void {
  ctl
    .command('replicas')
    .argument('[model]', "only this model's replicas")
    .description(
      'list replicas: model, profile, node, devices, state, ready since, restarts, endpoint, and why (cut short: llmgw ctl replica show ID has all of it)',
    )
    .action(
      run.action(async ({ o, conn }, model?: string) => {
        const client = connect(conn);
        const items = await client.listReplicas(model);
        // No replicas of a model that does not exist is a mistyped name, not an empty list.
        if (items.length === 0 && model !== undefined) await client.getModel(model);
        emit(o, { items }, (d) =>
          d.items.length === 0
            ? model === undefined
              ? 'No replicas: add a model (llmgw ctl model add -f FILE) with replicas of 1 or more.'
              : `No replicas of ${model}.`
            : table(
                [
                  'REPLICA',
                  'MODEL',
                  'PROFILE',
                  'NODE',
                  'DEVICES',
                  'STATE',
                  'READY',
                  'RESTARTS',
                  'ENDPOINT',
                  'REASON',
                ],
                d.items.map((r) => [
                  r.id ?? '-',
                  r.model,
                  r.profile ?? '-',
                  r.node ?? '-',
                  devicesText(r),
                  stateText(r),
                  r.ready_since === undefined ? '-' : age(r.ready_since),
                  String(r.restarts),
                  r.endpoint ?? '-',
                  r.reason === undefined ? '' : cut(r.reason, reasonWidth),
                ]),
              ),
        );
      }),
    );

  const replica = ctl.command('replica').description('show or restart one replica');
  replica
    .command('show')
    .argument('<id>', 'the replica')
    .description(
      "a replica's shards: node, devices, port, state, restarts and the last exit with its log lines",
    )
    .action(
      run.action(async ({ o, conn }, id: string) => {
        const r = await connect(conn).getReplica(id);
        emit(o, r, replicaDetail);
      }),
    );
  replica
    .command('restart')
    .argument('<id>', 'the replica')
    .option('--in-place', 'stop it first, then start a new one (when there is no room beside it)')
    .description('start a new replica beside this one; this one stops once the new one is ready')
    .action(
      run.action(async ({ opts, o, conn }, id: string) => {
        const r = await connect(conn).restartReplica(id, opts['inPlace'] === true);
        emit(o, r, (v) => v.message);
      }),
    );

  ctl
    .command('logs')
    .argument('<replica>', 'the replica')
    .option('-f, --follow', 'keep printing new lines until interrupted')
    .option('--tail <lines>', 'how many recent lines', '200')
    .option('--rank <rank>', 'which shard of a multi-node replica', '0')
    .description("a replica's engine log (its stdout and stderr)")
    .action(
      run.action(async ({ opts, conn }, id: string) => {
        const tail = Number(stringOpt(opts, 'tail'));
        const rank = Number(stringOpt(opts, 'rank'));
        if (!Number.isInteger(tail) || tail < 0) throw new UsageError('--tail is a whole number of lines');
        if (!Number.isInteger(rank) || rank < 0) throw new UsageError('--rank is 0 or more');
        const abort = new AbortController();
        const onSignal = () => abort.abort();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        try {
          await connect(conn).logs(id, {
            tail,
            rank,
            follow: opts['follow'] === true,
            signal: abort.signal,
            onText: (t) => process.stdout.write(t),
          });
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
        }
      }),
    );
}

function devicesText(r: ReplicaView): string {
  const parts = r.shards.map((s) => (s.devices.length === 0 ? cpuText(s.threads) : s.devices.join(',')));
  const text =
    r.shards.length > 1 ? r.shards.map((s, i) => `${s.node}:${parts[i] ?? ''}`).join(' ') : (parts[0] ?? '-');
  return text === '' ? '-' : text;
}

function cpuText(threads: number | undefined): string {
  return threads === undefined ? 'cpu' : `cpu (${threads} thread${threads === 1 ? '' : 's'})`;
}

/**
 * The state alone (a download with how far it is): its reason, which may run to hundreds of
 * characters, has a column of its own.
 */
export function stateText(r: ReplicaView): string {
  const state =
    r.state === 'downloading' && r.download !== undefined
      ? `downloading ${percentDone(r.download)}%`
      : r.state;
  return r.retiring === true ? `${state} (replaced)` : state;
}

/** How much of a reason the table shows; `replica show ID` has all of it. */
const reasonWidth = 60;

/** One line of at most `width` characters, ending in … when cut. */
export function cut(text: string, width: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= width ? line : `${line.slice(0, width - 1).trimEnd()}…`;
}

export function replicaDetail(r: ReplicaView): string {
  const lines = [
    `Replica:    ${r.id ?? '-'}`,
    `Model:      ${r.model} (profile ${r.profile ?? '-'}, ${r.engine ?? '-'})`,
    `State:      ${stateText(r)}`,
    ...(r.download === undefined ? [] : [`Download:   ${progressText(r.download)}`]),
    ...(r.reason === undefined ? [] : [`Reason:     ${r.reason}`]),
    `Endpoint:   ${r.endpoint ?? '-'}`,
    `Restarts:   ${r.restarts}`,
    `Created:    ${r.created_at ?? '-'}`,
    '',
    'Shards:',
  ];
  for (const s of r.shards) {
    lines.push(
      `  rank ${s.rank}: node ${s.node}, devices ${s.devices.length === 0 ? 'cpu' : s.devices.join(',')}, port ${s.port}, ${s.state}${s.reason === undefined ? '' : ` (${s.reason})`}${s.pid === undefined ? '' : `, pid ${s.pid}`}, ${s.restarts} restarts`,
    );
    if (s.engine_bin !== undefined) lines.push(`    engine binary: ${s.engine_bin.why}`);
    if (s.last_exit !== undefined) {
      lines.push(
        `    last exit: ${s.last_exit.signal ?? `code ${s.last_exit.code ?? '?'}`} at ${s.last_exit.at}`,
      );
      for (const l of s.last_exit.log_tail.slice(-10)) lines.push(`      | ${l}`);
    }
  }
  return lines.join('\n');
}
