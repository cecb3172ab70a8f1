import { describe, expect, it } from 'vitest';

import type { NodeDownload } from '../../protocol/cache-views.js';
import type { Output } from '../output.js';

import { barLine, progressLine, progressPrinter } from './pull.js';

const row = (over: Partial<NodeDownload>): NodeDownload => ({
  node: 'gpu-1',
  model: 'qwen',
  source: 'hf://Qwen/Q-GGUF/q.gguf',
  state: 'downloading',
  done: 2_000_000_000,
  total: 4_700_000_000,
  rate_bps: 85_000_000,
  eta_s: 32,
  ...over,
});

function capture(): { o: Output; lines: string[] } {
  const lines: string[] = [];
  return { o: { json: false, out: (t) => lines.push(t), err: (t) => lines.push(`err: ${t}`) }, lines };
}

describe('ctl model pull progress', () => {
  it.each([
    [row({}), 'node gpu-1: downloading 42% (2.0 GB of 4.7 GB, 85 MB/s, 32 s left)'],
    [row({ state: 'queued', done: 0, rate_bps: 0, eta_s: undefined }), 'node gpu-1: queued'],
    [row({ state: 'verifying', done: 4_700_000_000 }), 'node gpu-1: verifying 4.7 GB'],
    [row({ state: 'done', done: 4_700_000_000 }), 'node gpu-1: done (4.7 GB)'],
    [row({ state: 'failed', error: 'the hub answered 404' }), 'node gpu-1: failed: the hub answered 404'],
  ])('one line per update on a pipe: %j', (r, line) => {
    expect(progressLine(r)).toBe(line);
  });

  it('draws a bar per node on a terminal, names padded to line up', () => {
    expect(barLine(row({}), 8, 10)).toBe('gpu-1     [####------]  42%  2.0 GB of 4.7 GB, 85 MB/s, 32 s left');
    expect(barLine(row({ state: 'done', done: 4_700_000_000 }), 5, 10)).toBe(
      'gpu-1  [##########] 100%  done (4.7 GB)',
    );
  });

  it('prints a line only when a node moved on (its state or its whole percent)', () => {
    const { o, lines } = capture();
    const show = progressPrinter('lines', o);
    show([row({ done: 2_000_000_000 }), row({ node: 'gpu-2', state: 'queued', done: 0 })]);
    show([row({ done: 2_010_000_000 }), row({ node: 'gpu-2', state: 'queued', done: 0 })]);
    show([row({ done: 2_100_000_000 }), row({ node: 'gpu-2', state: 'downloading', done: 1 })]);
    expect(lines).toEqual([
      'node gpu-1: downloading 42% (2.0 GB of 4.7 GB, 85 MB/s, 32 s left)',
      'node gpu-2: queued',
      'node gpu-1: downloading 44% (2.1 GB of 4.7 GB, 85 MB/s, 32 s left)',
      'node gpu-2: downloading 0% (1 B of 4.7 GB, 85 MB/s, 32 s left)',
    ]);
  });

  it('prints JSON lines with --json, each a whole report', () => {
    const { o, lines } = capture();
    progressPrinter('json', o)([row({ state: 'failed', error: 'no room' })]);
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      {
        node: 'gpu-1',
        model: 'qwen',
        source: 'hf://Qwen/Q-GGUF/q.gguf',
        state: 'failed',
        done: 2_000_000_000,
        total: 4_700_000_000,
        rate_bps: 85_000_000,
        eta_s: 32,
        error: 'no room',
      },
    ]);
  });
});
