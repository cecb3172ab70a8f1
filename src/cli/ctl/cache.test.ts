import { describe, expect, it } from 'vitest';

import { bytesText, durationText, percentDone } from '../../protocol/cache-views.js';

import { cacheText, purgeText } from './cache.js';

describe('ctl cache', () => {
  it('prints a table per node, and the mirror, with short snapshots and sizes', () => {
    const text = cacheText({
      nodes: [
        {
          node: 'gpu-1',
          root: '/data/models/hub',
          max_bytes: 500e9,
          free_bytes: 120e9,
          entries: [
            {
              source: 'hf://Qwen/Qwen2.5-7B-Instruct',
              snapshot: 'a'.repeat(40),
              models: ['qwen', 'qwen-long'],
              files: 9,
              bytes: 15.2e9,
              incomplete_bytes: 1e9,
            },
          ],
        },
        { node: 'gpu-2', entries: [], error: 'node gpu-2 did not answer within 10 s' },
        { node: 'cpu-1', root: '/d/models/hub', entries: [] },
      ],
      mirror: { entries: [] },
    });
    expect(text.split('\n')).toEqual([
      'node gpu-1: /data/models/hub, 15 GB in 1 snapshot, bound 500 GB (agent.models.max_gb), 120 GB free',
      'SOURCE                          SNAPSHOT   MODELS           FILES   SIZE                      LAST USED',
      'hf://Qwen/Qwen2.5-7B-Instruct   aaaaaaa    qwen,qwen-long   9       15 GB (+1.0 GB partial)   -',
      '',
      'node gpu-2: node gpu-2 did not answer within 10 s',
      '',
      'node cpu-1: /d/models/hub, empty',
      '',
      'mirror: empty',
    ]);
  });

  it('says what rm --purge did with the files', () => {
    expect(
      purgeText({
        model: 'm',
        source: 'hf://a/b',
        nodes: ['gpu-1', 'gpu-2'],
        mirror: 'removed 2 files from the mirror',
      }),
    ).toBe(
      "its files are being removed from nodes gpu-1, gpu-2 (files a running engine uses are kept, and each node's log says which)\nremoved 2 files from the mirror",
    );
    expect(
      purgeText({
        model: 'm',
        nodes: [],
        kept: 'no files were removed: model n uses the same files (hf://a/b)',
      }),
    ).toBe('no files were removed: model n uses the same files (hf://a/b)');
  });

  it.each([
    [0, '0 B'],
    [999, '999 B'],
    [1000, '1.0 kB'],
    [4_700_000_000, '4.7 GB'],
    [85_400_000, '85 MB'],
    [9_960_000, '10 MB'],
    [999_600_000, '1.0 GB'],
    [140e12, '140 TB'],
  ])('sizes in decimal units: %d is %s', (n, text) => {
    expect(bytesText(n)).toBe(text);
  });

  it.each([
    [18, '18 s'],
    [89, '89 s'],
    [90, '2 min'],
    [3600, '60 min'],
    [7500, '2 h 5 min'],
  ])('times left: %d s is %s', (s, text) => {
    expect(durationText(s)).toBe(text);
  });

  it('never says 100% before the last byte', () => {
    expect(percentDone({ done: 999, total: 1000 })).toBe(99);
    expect(percentDone({ done: 1000, total: 1000 })).toBe(100);
    expect(percentDone({ done: 0, total: 0 })).toBe(0);
  });
});
