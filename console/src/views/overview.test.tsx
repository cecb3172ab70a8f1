// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, render, screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';

import { Api, type ClusterStatus, type NodeView, type ReplicaView } from '../api.js';
import { SessionProvider } from '../session.js';
import { Overview } from './overview.js';
import { deviceGroups, replicaCounts } from './overview-counts.js';

afterEach(cleanup);

const counts = (cls: string, total: number, used: number, other = 0) => ({
  class: cls,
  total,
  used,
  free: total - used,
  other_processes: other,
});

// As the server sorts them: by class name, MIG profiles after their cards.
const devices: ClusterStatus['devices'] = [
  counts('a100-80g', 2, 1),
  counts('a100-80g-mig-1g.10gb', 7, 0, 1),
  counts('a100-80g-mig-3g.40gb', 2, 2),
  counts('h100-80g', 4, 0),
];

describe('deviceGroups', () => {
  it('groups MIG instances under their card, each its own class, with used and free', () => {
    expect(deviceGroups(devices)).toEqual([
      {
        card: 'a100-80g',
        total: 11,
        used: 3,
        free: 8,
        rows: [
          { class: 'a100-80g', total: 2, used: 1, free: 1, otherProcesses: 0 },
          { class: 'a100-80g-mig-1g.10gb', mig: '1g.10gb', total: 7, used: 0, free: 7, otherProcesses: 1 },
          { class: 'a100-80g-mig-3g.40gb', mig: '3g.40gb', total: 2, used: 2, free: 0, otherProcesses: 0 },
        ],
      },
      {
        card: 'h100-80g',
        total: 4,
        used: 0,
        free: 4,
        rows: [{ class: 'h100-80g', total: 4, used: 0, free: 4, otherProcesses: 0 }],
      },
    ]);
  });

  it('keeps a card whose every device is a MIG instance, and reads 1c. and +me profiles', () => {
    expect(
      deviceGroups([counts('h100-80g-mig-1c.3g.40gb', 2, 1), counts('h100-80g-mig-1g.10gb+me', 1, 0)]),
    ).toEqual([
      {
        card: 'h100-80g',
        total: 3,
        used: 1,
        free: 2,
        rows: [
          {
            class: 'h100-80g-mig-1c.3g.40gb',
            mig: '1c.3g.40gb',
            total: 2,
            used: 1,
            free: 1,
            otherProcesses: 0,
          },
          {
            class: 'h100-80g-mig-1g.10gb+me',
            mig: '1g.10gb+me',
            total: 1,
            used: 0,
            free: 1,
            otherProcesses: 0,
          },
        ],
      },
    ]);
  });
});

const replica = (o: Partial<ReplicaView> & Pick<ReplicaView, 'model' | 'state'>): ReplicaView => ({
  id: 'r1',
  profile: 'default',
  engine: 'llamacpp',
  restarts: 0,
  shards: [],
  ...o,
});

describe('replicaCounts', () => {
  it('counts replicas by state in a fixed order and lists those not ready with their reason', () => {
    const c = replicaCounts([
      replica({ id: 'a', model: 'qwen', state: 'ready' }),
      replica({ id: null, model: 'llama', state: 'pending', reason: 'no node has 2 free a100-80g' }),
      replica({ id: 'b', model: 'qwen', state: 'ready' }),
      replica({
        id: 'c',
        model: 'mistral',
        state: 'downloading',
        download: { done: 25, total: 100, rate_bps: 5 },
      }),
    ]);
    expect(c.byState).toEqual([
      { state: 'downloading', count: 1 },
      { state: 'ready', count: 2 },
      { state: 'pending', count: 1 },
    ]);
    expect(c.notReady).toEqual([
      { id: null, model: 'llama', state: 'pending', reason: 'no node has 2 free a100-80g' },
      { id: 'c', model: 'mistral', state: 'downloading', progress: 0.25 },
    ]);
  });
});

const node: NodeView = {
  id: 'n1',
  name: 'gpu-1',
  state: 'ready',
  last_seen: '2026-12-03T13:00:00Z',
  address: '10.0.0.2',
  agent_version: '0.1.0',
  joined_at: '2026-12-01T00:00:00Z',
  host: {
    hostname: 'gpu-1',
    os: 'linux',
    arch: 'x64',
    cpus: { count: 32, model: 'x' },
    memory: { total_mib: 1, free_mib: 1 },
    disk: { path: '/', total_mib: 1, free_mib: 1 },
  },
  discovery: { method: 'nvml', reasons: [] },
  devices: [],
  excluded: [],
  devices_by_class: {},
  devices_in_use_by_class: {},
};

function fakeApi(answers: Record<string, unknown>): Api {
  return new Api({
    key: 'k',
    fetch: (input) => {
      const path = (input as string).replace('/api/v1', '');
      const body = answers[path];
      return Promise.resolve(
        body === undefined
          ? new Response(JSON.stringify({ error: { code: 'not_found', message: `no ${path}` } }), {
              status: 404,
            })
          : new Response(JSON.stringify(body), {
              status: 200,
              headers: { 'content-type': 'application/json' },
            }),
      );
    },
  });
}

describe('Overview', () => {
  it('shows nodes by state, devices by class with MIG instances, and pending replicas with their reason', async () => {
    const status: ClusterStatus = {
      nodes: { total: 2, ready: 1, not_ready: 1 },
      devices,
      excluded: [{ node: 'gpu-1', card: 3, reason: 'MIG mode changes at the next reset' }],
      cpus: 64,
      memory_mib: { total: 1, free: 1 },
    };
    const api = fakeApi({
      '/nodes': {
        items: [
          node,
          { ...node, id: 'n2', name: 'gpu-2', state: 'not_ready', reason: 'no heartbeat for 45 s' },
        ],
      },
      '/status': status,
      '/traffic': {
        step_s: 10,
        gateway: true,
        models: {},
        points: [
          {
            t: '2026-12-03T13:00:00.000Z',
            requests_per_s: 2,
            prompt_tokens_per_s: 20,
            completion_tokens_per_s: 60,
            ttft_p50_ms: 120,
            ttft_p95_ms: 400,
            errors_per_s: 0,
          },
          {
            t: '2026-12-03T13:00:10.000Z',
            requests_per_s: 0.5,
            prompt_tokens_per_s: 5,
            completion_tokens_per_s: 15,
            ttft_p50_ms: 200,
            ttft_p95_ms: 600,
            errors_per_s: 0.1,
          },
        ],
      },
      '/replicas': {
        items: [
          replica({ id: null, model: 'llama', state: 'pending', reason: 'no node has 2 free a100-80g' }),
        ],
      },
    });
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <SessionProvider session={{ api, name: 'ops', role: 'user', signOut: () => undefined }}>
          <Overview />
        </SessionProvider>
      </QueryClientProvider>,
    );
    const table = await screen.findByRole('table', { name: 'Devices by class, used and free' });
    const row = within(table).getByRole('row', { name: /a100-80g-mig-3g\.40gb/ });
    expect(
      within(row)
        .getAllByRole('cell')
        .map((c) => c.textContent),
    ).toEqual(['MIG 3g.40gb', '2', '2', '0']);
    const mig1 = within(table).getByRole('row', { name: /a100-80g-mig-1g\.10gb/ });
    expect(
      within(mig1)
        .getAllByRole('cell')
        .map((c) => c.textContent),
    ).toEqual(['MIG 1g.10gb', '7', '0', '7 (1 held by other processes)']);
    const card = within(table).getByRole('row', { name: /^a100-80g card/ });
    expect(
      within(card)
        .getAllByRole('cell')
        .map((c) => c.textContent),
    ).toEqual(['card', '2', '1', '1']);
    expect(screen.getByText(/MIG mode changes at the next reset/)).toBeTruthy();
    // The gateway's figures now (the last step) and over the series.
    const traffic = await screen.findByRole('table', { name: /traffic now and over the last hour/ });
    const cells = (name: RegExp) =>
      within(within(traffic).getByRole('row', { name }))
        .getAllByRole('cell')
        .map((c) => c.textContent);
    expect(cells(/^Requests\/s/)).toEqual(['0.5', '1.3']);
    expect(cells(/^Tokens\/s/)).toEqual(['20', '50']);
    expect(cells(/p95/)).toEqual(['600 ms', '440 ms']);
    expect((await screen.findByText(/no heartbeat for 45 s/)).closest('li')?.textContent).toContain('gpu-2');
    expect((await screen.findByText(/no node has 2 free a100-80g/)).closest('li')?.textContent).toBe(
      'llama pending: no node has 2 free a100-80g',
    );
  });

  it("shows a refusal in the server's words where the data would be", async () => {
    const api = fakeApi({
      '/nodes': { items: [] },
      '/replicas': { items: [] },
      '/traffic': { step_s: 10, gateway: false, points: [], models: {} },
    });
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <SessionProvider session={{ api, name: 'ops', role: 'user', signOut: () => undefined }}>
          <Overview />
        </SessionProvider>
      </QueryClientProvider>,
    );
    expect((await screen.findByRole('alert')).textContent).toBe(
      "Could not load the cluster's status: no /status",
    );
    expect(await screen.findByText(/The gateway runs apart \(llmgw gateway\)/)).toBeTruthy();
  });
});
