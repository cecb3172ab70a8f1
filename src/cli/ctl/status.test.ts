import { describe, expect, it } from 'vitest';

import type { ClusterStatus } from '../../protocol/node-views.js';

import { statusText } from './nodes.js';

const base: ClusterStatus = {
  nodes: { total: 1, ready: 1, not_ready: 0 },
  devices: [],
  excluded: [],
  cpus: 16,
  memory_mib: { total: 65536, free: 60000 },
};

describe('ctl status', () => {
  it('lists the downloads running on the nodes', () => {
    const text = statusText({
      ...base,
      downloads: [
        {
          node: 'gpu-1',
          model: 'qwen',
          source: 'hf://Qwen/Q',
          state: 'downloading',
          done: 2e9,
          total: 4.7e9,
          rate_bps: 85e6,
          eta_s: 32,
        },
        {
          node: 'gpu-2',
          model: 'qwen',
          source: 'hf://Qwen/Q',
          state: 'queued',
          done: 0,
          total: 4.7e9,
          rate_bps: 0,
        },
      ],
    });
    expect(text.split('\n').slice(-4)).toEqual([
      'Downloads:',
      '  NODE    MODEL   STATE             PROGRESS',
      '  gpu-1   qwen    downloading 42%   2.0 GB of 4.7 GB, 85 MB/s, 32 s left',
      '  gpu-2   qwen    queued            0 B of 4.7 GB',
    ]);
  });

  it('has no downloads section when none runs', () => {
    expect(statusText(base)).not.toContain('Downloads');
  });
});
