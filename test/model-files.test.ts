import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Agent } from '../src/agent/agent.js';
import type { Origin } from '../src/models/origin.js';
import type { AgentMessage, ServerMessage } from '../src/protocol/agent-protocol.js';

import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { inventoryWith } from './support/inventory.js';
import { until } from './support/timing.js';

// The control plane's side of model files: pulls sent to agents and their progress kept per
// node, caches asked of agents, purges after the model is gone, and replicas waiting for their
// files shown as downloading. The agents here are scripted: they say what a test tells them.

const quiet = pino({ level: 'silent' });
const commit = 'a'.repeat(40);
const origin = (repo: string): Origin => ({
  source: `hf://${repo}/tiny-Q4_K_M.gguf`,
  kind: 'hf',
  repo,
  revision: 'main',
  commit,
  files: [
    { path: 'tiny-Q4_K_M.gguf', size: 4_700_000_000, sha256: 'b'.repeat(64) },
    { path: 'mmproj-f16.gguf', size: 300_000_000, sha256: 'c'.repeat(64) },
  ],
});
const origins: Record<string, Origin> = {
  tiny: origin('org/tiny'),
  copy: origin('org/tiny'),
  local: {
    source: '/models/local.gguf',
    kind: 'path',
    revision: '',
    files: [{ path: 'local.gguf', size: 10 }],
  },
};

/** Polls until the condition holds (it may ask the API), naming it when it never does. */
type Incoming = Exclude<ServerMessage, { type: 'welcome' }>;

interface Scripted {
  agent: Agent;
  got: Incoming[];
  send: (m: AgentMessage) => boolean;
}

describe('model files through the control plane', () => {
  let t: TestControlPlane;
  const agents: Agent[] = [];
  const nodes: Record<string, Scripted> = {};

  const scripted = async (name: string): Promise<Scripted> => {
    const token = (await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string;
    const got: Scripted['got'] = [];
    const agent = new Agent({
      server: t.url,
      token,
      name,
      dataDir: mkdtempSync(join(tmpdir(), 'llmgw-files-agent-')),
      logger: quiet,
      inventory: () => Promise.resolve(inventoryWith([], name)),
      backoff: { initialMs: 20, maxMs: 200 },
      onMessage: (m) => got.push(m),
    });
    agents.push(agent);
    void agent.run();
    await agent.joined;
    // A node takes shards once its agent has said what runs there.
    agent.send({ type: 'shards', statuses: [] });
    return { agent, got, send: (m) => agent.send(m) };
  };

  const messages = <T extends Incoming['type']>(n: Scripted, type: T) =>
    n.got.filter((m): m is Extract<Incoming, { type: T }> => m.type === type);

  beforeAll(async () => {
    t = await startControlPlane({
      config: [
        'agent:',
        '  heartbeat_ms: 200',
        'models:',
        '  - name: tiny',
        '    source: hf://org/tiny/tiny-Q4_K_M.gguf',
        '    replicas: 0',
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
        '  - name: local',
        '    source: /models/local.gguf',
        '    replicas: 0',
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
        '  - name: unresolved',
        '    source: hf://org/other/other.gguf',
        '    replicas: 0',
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
      ].join('\n'),
      originOf: (model) => Promise.resolve(origins[model]),
    });
    nodes['node-a'] = await scripted('node-a');
    nodes['node-b'] = await scripted('node-b');
    await until(
      'both nodes ready',
      () => t.cp.registry.views().filter((v) => v.state === 'ready').length === 2,
    );
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await t.stop();
  });

  it('sends a pull to every ready node, shows each queued, then as each reports', async () => {
    const a = nodes['node-a'] as Scripted;
    const b = nodes['node-b'] as Scripted;
    const started = await api(t.url, t.adminKey, 'POST', '/models/tiny/pull', {});
    expect(started.status).toBe(202);
    expect(started.body).toEqual({
      model: 'tiny',
      source: origins['tiny']?.source,
      commit,
      nodes: ['node-a', 'node-b'],
    });
    await until('both agents asked', () => messages(a, 'pull').length > 0 && messages(b, 'pull').length > 0);
    expect(messages(a, 'pull')[0]).toEqual({ type: 'pull', model: 'tiny', origin: origins['tiny'] });

    const queued = await api(t.url, t.adminKey, 'GET', '/models/tiny/downloads');
    expect(
      queued.body.nodes.map((n: { node: string; state: string; total: number }) => [
        n.node,
        n.state,
        n.total,
      ]),
    ).toEqual([
      ['node-a', 'queued', 5_000_000_000],
      ['node-b', 'queued', 5_000_000_000],
    ]);

    a.send({
      type: 'downloads',
      downloads: [
        {
          model: 'tiny',
          source: origins['tiny']?.source ?? '',
          commit,
          state: 'downloading',
          done: 2_100_000_000,
          total: 5_000_000_000,
          rate_bps: 85_000_000,
          eta_s: 35,
        },
      ],
    });
    b.send({
      type: 'downloads',
      downloads: [
        {
          model: 'tiny',
          source: origins['tiny']?.source ?? '',
          commit,
          state: 'failed',
          done: 0,
          total: 5_000_000_000,
          rate_bps: 0,
          error: 'tiny-Q4_K_M.gguf needs 4.7 GB more on disk, and 1.0 GB is free at /data/models/hub',
        },
      ],
    });
    await until('both reports kept', async () => {
      const d = await api(t.url, t.adminKey, 'GET', '/models/tiny/downloads');
      return d.body.nodes.every((n: { state: string }) => n.state !== 'queued');
    });
    const d = await api(t.url, t.adminKey, 'GET', '/models/tiny/downloads');
    expect(d.body.nodes).toEqual([
      expect.objectContaining({ node: 'node-a', state: 'downloading', done: 2_100_000_000, eta_s: 35 }),
      expect.objectContaining({
        node: 'node-b',
        state: 'failed',
        error: expect.stringContaining('needs 4.7 GB more'),
      }),
    ]);
    // ctl status lists what is running, not what ended.
    const status = await api(t.url, t.adminKey, 'GET', '/status');
    expect(status.body.downloads).toEqual([
      expect.objectContaining({ node: 'node-a', model: 'tiny', state: 'downloading' }),
    ]);
  });

  it('pulls onto the nodes named only', async () => {
    const b = nodes['node-b'] as Scripted;
    const before = messages(b, 'pull').length;
    const r = await api(t.url, t.adminKey, 'POST', '/models/tiny/pull', { nodes: ['node-b'] });
    expect(r.body.nodes).toEqual(['node-b']);
    await until('node-b asked again', () => messages(b, 'pull').length === before + 1);
  });

  it.each([
    [
      'an unknown node, with the name it was likely meant to be',
      'tiny',
      { nodes: ['node-c', 'nod-a'] },
      404,
      'no node is named "node-c"; did you mean "node-a"? (llmgw ctl nodes lists them)',
    ],
    [
      'a model whose source was never resolved',
      'unresolved',
      {},
      409,
      'model unresolved has no pinned files (its source hf://org/other/other.gguf was not resolved when it was added): apply it again (llmgw ctl model apply -f FILE) to resolve it',
    ],
    [
      'a model read from a path on the nodes',
      'local',
      {},
      400,
      'model local is read from /models/local.gguf on each node, which llmgw does not fetch: put the files at that path on every node',
    ],
    [
      'a model that does not exist',
      'tinyy',
      {},
      404,
      'model "tinyy" does not exist; did you mean "tiny"? (llmgw ctl models lists them)',
    ],
    ['a field it does not take', 'tiny', { node: 'node-a' }, 400, 'unknown key "node"'],
  ])('refuses %s', async (_what, model, body, status, message) => {
    const r = await api(t.url, t.adminKey, 'POST', `/models/${model}/pull`, body);
    expect(r.status).toBe(status);
    expect(r.body.error.message).toContain(message);
  });

  it("lists each node's cache as its agent answers, and says which did not answer in time", async () => {
    const a = nodes['node-a'] as Scripted;
    const before = messages(a, 'cache_list').length;
    const answer = (async () => {
      await until('asked', () => messages(a, 'cache_list').length > before);
      const ask = messages(a, 'cache_list').at(-1);
      a.send({
        type: 'cache',
        request: ask?.request ?? '',
        root: '/data/models/hub',
        max_bytes: 500e9,
        free_bytes: 120e9,
        entries: [
          {
            source: origins['tiny']?.source ?? '',
            snapshot: commit,
            models: ['tiny'],
            files: 2,
            bytes: 5e9,
            last_used: '2026-01-01T00:00:00.000Z',
          },
        ],
      });
    })();
    const r = await api(t.url, t.adminKey, 'GET', '/cache?node=node-a');
    await answer;
    expect(r.body).toEqual({
      nodes: [
        {
          node: 'node-a',
          root: '/data/models/hub',
          max_bytes: 500e9,
          free_bytes: 120e9,
          entries: [expect.objectContaining({ snapshot: commit, models: ['tiny'], bytes: 5e9 })],
        },
      ],
    });
    // node-b's script never answers.
    const silent = await t.cp.fleet.caches('node-b', 200);
    expect(silent).toEqual([
      {
        node: 'node-b',
        entries: [],
        error:
          'node node-b did not answer within 0 s: its agent may be busy or an older version; llmgw ctl nodes shows it',
      },
    ]);
    const unknown = await api(t.url, t.adminKey, 'GET', '/cache?node=nodeb');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toBe(
      'no node is named "nodeb"; did you mean "node-b"? (llmgw ctl nodes lists them)',
    );
  });

  it('shows a replica waiting for its files as downloading, with its progress', async () => {
    const a = nodes['node-a'] as Scripted;
    const b = nodes['node-b'] as Scripted;
    origins['dl'] = origin('org/dl');
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'dl',
      source: '/models/dl.gguf',
      replicas: 1,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    expect(added.status).toBe(201);
    const placed = () =>
      [a, b].flatMap((n) =>
        (messages(n, 'assign').at(-1)?.shards ?? [])
          .filter((s) => s.model.name === 'dl')
          .map((shard) => ({ n, shard })),
      )[0];
    await until('the replica placed', () => placed() !== undefined);
    const assigned = placed();
    if (assigned === undefined) throw new Error('not placed');
    const key = `${assigned.shard.replica}/0`;
    assigned.n.send({
      type: 'shards',
      statuses: [
        {
          key,
          replica: assigned.shard.replica,
          rank: 0,
          state: 'downloading',
          reason: `downloading ${origins['tiny']?.source ?? ''} (2.1 GB of 5.0 GB, 85 MB/s, 35 s left)`,
          download: { done: 2.1e9, total: 5e9, rate_bps: 85e6, eta_s: 35 },
          restarts: 0,
        },
      ],
    });
    await until('downloading', async () => {
      const r = await api(t.url, t.adminKey, 'GET', '/replicas?model=dl');
      return r.body.items[0]?.state === 'downloading';
    });
    const r = (await api(t.url, t.adminKey, 'GET', '/replicas?model=dl')).body.items[0];
    expect(r).toMatchObject({
      state: 'downloading',
      reason: expect.stringContaining('2.1 GB of 5.0 GB'),
      download: { done: 2.1e9, total: 5e9, rate_bps: 85e6, eta_s: 35 },
      shards: [{ state: 'downloading', download: { done: 2.1e9 } }],
    });
    await api(t.url, t.adminKey, 'DELETE', '/models/dl');
  });

  it('removes a model, then asks every node to purge its files; keeps files another model names', async () => {
    const a = nodes['node-a'] as Scripted;
    const add = (name: string) =>
      api(t.url, t.adminKey, 'POST', '/models', {
        name,
        source: '/models/added.gguf',
        replicas: 0,
        profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
      });
    expect((await add('copy')).status).toBe(201);
    origins['gone'] = origin('org/gone');
    expect((await add('gone')).status).toBe(201);

    // tiny (declared) has the same files as copy: they stay.
    const kept = await api(t.url, t.adminKey, 'DELETE', '/models/copy?purge=true');
    expect(kept.status).toBe(200);
    expect(kept.body.purge).toEqual({
      model: 'copy',
      source: origins['tiny']?.source,
      nodes: [],
      kept: `no files were removed: model tiny uses the same files (${origins['tiny']?.source ?? ''})`,
    });

    const before = messages(a, 'purge').length;
    const gone = await api(t.url, t.adminKey, 'DELETE', '/models/gone?purge=true');
    expect(gone.body).toMatchObject({ name: 'gone', purge: { model: 'gone', nodes: ['node-a', 'node-b'] } });
    await until('purge sent', () => messages(a, 'purge').length > before);
    expect(messages(a, 'purge').at(-1)).toEqual({ type: 'purge', model: 'gone', origins: [origins['gone']] });
    expect((await api(t.url, t.adminKey, 'GET', '/models/gone')).status).toBe(404);
  });

  it('removes without purging when not asked', async () => {
    origins['plain'] = origin('org/plain');
    await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'plain',
      source: '/models/plain.gguf',
      replicas: 0,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    const r = await api(t.url, t.adminKey, 'DELETE', '/models/plain');
    expect(r.status).toBe(200);
    expect(r.body.purge).toBeUndefined();
    expect(r.body.name).toBe('plain');
  });
});
