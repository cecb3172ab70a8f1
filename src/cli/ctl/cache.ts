import type { Command } from 'commander';

import type { CacheEntry } from '../../protocol/agent-protocol.js';
import { bytesText, type CacheView, type NodeCache, type PurgeResult } from '../../protocol/cache-views.js';
import { stringOpt, type Runner } from '../command.js';
import { age, emit, table } from '../output.js';

import { connect } from './connection.js';

export function registerCache(ctl: Command, run: Runner): void {
  ctl
    .command('cache')
    .option('--node <node>', "only this node's cache")
    .description(
      "the model files each node's cache and the mirror hold: source, snapshot, models, files, size, last used",
    )
    .action(
      run.action(async ({ opts, o, conn }) => {
        const view = await connect(conn).cache(stringOpt(opts, 'node'));
        emit(o, view, cacheText);
      }),
    );
}

export function cacheText(v: CacheView): string {
  const parts = v.nodes.map(nodeText);
  if (v.mirror !== undefined) {
    const head = `mirror: ${v.mirror.error ?? summary(v.mirror.entries)}`;
    parts.push(v.mirror.entries.length === 0 ? head : `${head}\n${entriesTable(v.mirror.entries)}`);
  }
  return parts.length === 0 ? 'No node is connected, and there is no mirror.' : parts.join('\n\n');
}

function nodeText(n: NodeCache): string {
  if (n.error !== undefined) return `node ${n.node}: ${n.error}`;
  const facts = [
    ...(n.root === undefined ? [] : [n.root]),
    summary(n.entries),
    ...(n.max_bytes === undefined ? [] : [`bound ${bytesText(n.max_bytes)} (agent.models.max_gb)`]),
    ...(n.free_bytes === undefined ? [] : [`${bytesText(n.free_bytes)} free`]),
  ];
  const head = `node ${n.node}: ${facts.join(', ')}`;
  return n.entries.length === 0 ? head : `${head}\n${entriesTable(n.entries)}`;
}

function summary(entries: readonly CacheEntry[]): string {
  if (entries.length === 0) return 'empty';
  const bytes = entries.reduce((s, e) => s + e.bytes, 0);
  return `${bytesText(bytes)} in ${entries.length} snapshot${entries.length === 1 ? '' : 's'}`;
}

function entriesTable(entries: readonly CacheEntry[]): string {
  return table(
    ['SOURCE', 'SNAPSHOT', 'MODELS', 'FILES', 'SIZE', 'LAST USED'],
    entries.map((e) => [
      e.source,
      e.snapshot.slice(0, 7),
      e.models.length === 0 ? '-' : e.models.join(','),
      String(e.files),
      e.incomplete_bytes === undefined || e.incomplete_bytes === 0
        ? bytesText(e.bytes)
        : `${bytesText(e.bytes)} (+${bytesText(e.incomplete_bytes)} partial)`,
      e.last_used === undefined ? '-' : `${age(e.last_used)} ago`,
    ]),
  );
}

/** What `ctl model rm --purge` did with the model's files. */
export function purgeText(p: PurgeResult): string {
  const lines: string[] = [];
  if (p.kept !== undefined) lines.push(p.kept);
  if (p.nodes.length > 0)
    lines.push(
      `its files are being removed from ${p.nodes.length === 1 ? 'node' : 'nodes'} ${p.nodes.join(', ')} (files a running engine uses are kept, and each node's log says which)`,
    );
  else if (p.kept === undefined) lines.push('no node is connected: no node removed its files');
  if (p.mirror !== undefined) lines.push(p.mirror);
  return lines.join('\n');
}
