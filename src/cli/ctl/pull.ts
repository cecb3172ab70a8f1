import type { Command } from 'commander';

import { LlmgwError } from '../../core/errors.js';
import { bytesText, percentDone, progressText, type NodeDownload } from '../../protocol/cache-views.js';
import type { Runner } from '../command.js';
import type { Output } from '../output.js';

import { connect } from './connection.js';

/** How pull shows progress: bars redrawn in place on a terminal, a line per change on a pipe, JSON lines. */
export type PullMode = 'terminal' | 'lines' | 'json';

const ended = (d: Pick<NodeDownload, 'state'>) => d.state === 'done' || d.state === 'failed';

export function registerPull(model: Command, run: Runner): void {
  model
    .command('pull')
    .argument('<name>', 'the model')
    .option(
      '--node <node>',
      'fetch onto this node (repeat for several); default: every ready node',
      (v: string, all: string[]) => [...all, v],
      [] as string[],
    )
    .description(
      "fetch a model's files onto nodes now, ahead of placement, showing each node's progress (Ctrl-C stops watching, not the downloads)",
    )
    .action(
      run.action(async ({ opts, o, conn }, name: string) => {
        const client = connect(conn);
        const nodes = (opts['node'] as string[] | undefined) ?? [];
        const started = await client.pullModel(name, nodes);
        const mode: PullMode = o.json ? 'json' : process.stdout.isTTY ? 'terminal' : 'lines';
        const show = progressPrinter(mode, o);
        if (mode !== 'json')
          o.out(
            `fetching ${started.source}${started.commit === undefined ? '' : ` (${started.commit.slice(0, 7)})`} onto ${started.nodes.join(', ')}`,
          );

        const abort = new AbortController();
        const onSignal = () => abort.abort();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        let rows: NodeDownload[] = [];
        try {
          while (!abort.signal.aborted) {
            const d = await client.modelDownloads(name);
            const byNode = new Map(d.nodes.map((n) => [n.node, n]));
            rows = started.nodes.map(
              (node) =>
                byNode.get(node) ?? {
                  node,
                  model: name,
                  source: started.source,
                  state: 'queued',
                  done: 0,
                  total: 0,
                  rate_bps: 0,
                },
            );
            show(rows);
            if (rows.every(ended)) break;
            await sleep(500, abort.signal);
          }
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
        }
        if (abort.signal.aborted) {
          o.err(
            `stopped watching: the downloads go on on the nodes (llmgw ctl model pull ${name} shows them again, without fetching anything twice)`,
          );
          run.exitCode = 130;
          return;
        }
        const failed = rows.filter((r) => r.state === 'failed');
        if (failed.length > 0)
          throw new LlmgwError(
            'unavailable',
            failed
              .map(
                (f) =>
                  `model ${name} could not be fetched onto node ${f.node}: ${f.error ?? 'no reason given'}`,
              )
              .join('\n'),
          );
        if (mode !== 'json')
          o.out(
            `model ${name} is on ${rows.length === 1 ? `node ${rows[0]?.node ?? ''}` : `${rows.length} nodes`}`,
          );
      }),
    );
}

/** Prints each update: what changed since the last one (lines, JSON), or every bar again in place. */
export function progressPrinter(mode: PullMode, o: Output): (rows: readonly NodeDownload[]) => void {
  const last = new Map<string, string>();
  let drawn = 0;
  return (rows) => {
    if (mode === 'terminal') {
      const width = Math.max(...rows.map((r) => r.node.length));
      // Up to the first bar drawn, then each line cleared and written again.
      const up = drawn > 0 ? `\x1b[${drawn}F` : '';
      process.stdout.write(`${up}${rows.map((r) => `\x1b[2K${barLine(r, width)}\n`).join('')}`);
      drawn = rows.length;
      return;
    }
    for (const r of rows) {
      const key = `${r.state} ${percentDone(r)} ${r.error ?? ''}`;
      if (last.get(r.node) === key) continue;
      last.set(r.node, key);
      o.out(mode === 'json' ? JSON.stringify(jsonLine(r)) : progressLine(r));
    }
  };
}

function jsonLine(r: NodeDownload): Record<string, unknown> {
  return {
    node: r.node,
    model: r.model,
    source: r.source,
    ...(r.commit === undefined ? {} : { commit: r.commit }),
    state: r.state,
    done: r.done,
    total: r.total,
    rate_bps: r.rate_bps,
    ...(r.eta_s === undefined ? {} : { eta_s: r.eta_s }),
    ...(r.error === undefined ? {} : { error: r.error }),
  };
}

/** `node a: downloading 42% (2.0 GB of 4.7 GB, 85 MB/s, 18 s left)`: one line of a pipe. */
export function progressLine(r: NodeDownload): string {
  return `node ${r.node}: ${stateWords(r)}`;
}

function stateWords(r: NodeDownload): string {
  switch (r.state) {
    case 'queued':
      return 'queued';
    case 'downloading':
      return `downloading ${percentDone(r)}% (${progressText(r)})`;
    case 'verifying':
      return `verifying ${bytesText(r.total)}`;
    case 'done':
      return `done (${bytesText(r.total)})`;
    case 'failed':
      return `failed: ${r.error ?? 'no reason given'}`;
  }
}

/** `a  [########------------]  42%  2.0 GB of 4.7 GB, 85 MB/s, 18 s left`: one bar of a terminal. */
export function barLine(r: NodeDownload, nodeWidth: number, barWidth = 24): string {
  const pct = percentDone(r);
  const filled = Math.round((pct / 100) * barWidth);
  const bar = `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]`;
  const words = r.state === 'downloading' ? progressText(r) : stateWords(r);
  return `${r.node.padEnd(nodeWidth)}  ${bar} ${String(pct).padStart(3)}%  ${words}`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}
