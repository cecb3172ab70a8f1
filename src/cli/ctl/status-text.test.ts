import { describe, expect, it } from 'vitest';

import type { ClusterStatus } from '../../protocol/node-views.js';

import { statusText } from './nodes.js';

const base: ClusterStatus = {
  nodes: { total: 1, ready: 1, not_ready: 0 },
  devices: [],
  excluded: [],
  cpus: 8,
  memory_mib: { total: 16384, free: 8192 },
};
const now = Date.parse('2026-12-03T12:00:00Z');

describe('ctl status: the control planes', () => {
  it('names the leader, since when and its term, and each control plane with its role', () => {
    const text = statusText(
      {
        ...base,
        control_planes: [
          {
            id: 'cp-a',
            url: 'https://10.0.0.1:8080',
            version: '0.2.0',
            started_at: '2026-12-03T10:00:00Z',
            seen_at: '2026-12-03T11:59:58Z',
            state: 'serving',
            leader: true,
            leader_since: '2026-12-03T10:00:05Z',
            term: 3,
            self: false,
          },
          {
            id: 'cp-b',
            url: 'https://10.0.0.2:8080',
            version: '0.2.0',
            started_at: '2026-12-03T11:00:00Z',
            seen_at: '2026-12-03T11:50:00Z',
            state: 'silent',
            leader: false,
            self: true,
          },
        ],
      },
      now,
    );
    expect(text).toContain('Control planes: 2, cp-a leads since 2026-12-03T10:00:05Z (term 3)');
    expect(text).toMatch(/cp-a\s+https:\/\/10\.0\.0\.1:8080\s+0\.2\.0\s+leader\s+serving\s+2h\s+2s ago/);
    expect(text).toMatch(
      /cp-b \(this one\)\s+https:\/\/10\.0\.0\.2:8080\s+0\.2\.0\s+follower\s+silent\s+60m\s+10m ago/,
    );
  });

  it('says when none leads, and how soon one will', () => {
    const text = statusText(
      {
        ...base,
        control_planes: [
          {
            id: 'cp-b',
            url: 'http://127.0.0.1:8080',
            version: '0.2.0',
            started_at: '2026-12-03T11:00:00Z',
            seen_at: '2026-12-03T11:59:59Z',
            state: 'serving',
            leader: false,
            self: true,
          },
        ],
      },
      now,
    );
    expect(text).toContain('Control planes: 1, none leads now (one takes over within a lease: ha.lease_s)');
  });
});
