import { existsSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Origin } from '../src/models/origin.js';
import { resolveOrigin } from '../src/models/resolve.js';

import { llama31_8b, tinyTensors } from './fakes/gguf/models.js';
import { writeGguf } from './fakes/gguf/writer.js';
import { startFakeHub, type FakeHub } from './fakes/hub/hub.js';
import { llmgw, startDaemon } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { startTestAgent } from './support/agents.js';

// `llmgw ctl model pull`, `ctl cache` and `ctl model rm --purge`, as a user runs them, against a
// control plane with two agents that fetch from the fake hub.

const tiny = writeGguf({ metadata: llama31_8b, tensors: tinyTensors(64 * 1024) });
const extra = writeGguf({ metadata: [['general.architecture', { t: 'str', v: 'extra' }]] });

describe('ctl model pull and ctl cache', () => {
  let hub: FakeHub;
  let t: TestControlPlane;
  let hang: Server;
  const origins: Record<string, Origin> = {};
  const dirs: string[] = [];
  const stops: (() => Promise<void>)[] = [];
  let env: Record<string, string>;

  const agent = async (name: string) => {
    const a = await startTestAgent(t, name);
    dirs.push(a.dataDir);
    stops.push(a.stop);
    return a.dataDir;
  };

  beforeAll(async () => {
    hub = await startFakeHub({
      repos: {
        'org/tiny-GGUF': { files: { 'tiny-Q4_K_M.gguf': tiny } },
        'org/extra-GGUF': { files: { 'extra-Q8_0.gguf': extra } },
      },
    });
    origins['tiny'] = await resolveOrigin('hf://org/tiny-GGUF/tiny-Q4_K_M.gguf', {
      fetch,
      endpoint: hub.url,
    });
    origins['extra'] = await resolveOrigin('hf://org/extra-GGUF/extra-Q8_0.gguf', {
      fetch,
      endpoint: hub.url,
    });
    origins['missing'] = {
      ...origins['tiny'],
      source: 'hf://org/gone-GGUF/gone.gguf',
      repo: 'org/gone-GGUF',
      files: [{ path: 'gone.gguf', size: 10, sha256: 'd'.repeat(64) }],
    };
    // A server that says what its file is, and never sends it: a download that stays under way.
    hang = createServer((req, res) => {
      if (req.method === 'HEAD') res.writeHead(200, { 'content-length': 1_000_000, etag: '"etag-1"' }).end();
    });
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    const slowUrl = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/slow.gguf`;
    origins['slow'] = {
      source: slowUrl,
      kind: 'url',
      revision: '"etag-1"',
      files: [{ path: 'slow.gguf', size: 1_000_000, etag: '"etag-1"' }],
    };
    const declared = (name: string, source: string) => [
      `  - name: ${name}`,
      `    source: ${source}`,
      '    replicas: 0',
      '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
    ];
    t = await startControlPlane({
      config: [
        // Agents go to the hub themselves here (the mirror has its own test): the hub the control plane names.
        'hub:',
        `  endpoint: ${hub.url}`,
        'mirror:',
        '  enabled: false',
        'agent:',
        '  heartbeat_ms: 200',
        'models:',
        ...declared('tiny', 'hf://org/tiny-GGUF/tiny-Q4_K_M.gguf'),
        ...declared('missing', 'hf://org/gone-GGUF/gone.gguf'),
        ...declared('slow', slowUrl),
      ].join('\n'),
      originOf: (model) => Promise.resolve(origins[model]),
    });
    await agent('node-a');
    await agent('node-b');
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
  });
  afterAll(async () => {
    for (const s of stops) await s();
    await t.stop();
    await hub.close();
    hang.closeAllConnections();
    await new Promise((r) => hang.close(r));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('fetches onto every ready node, a line per update on a pipe, and exits 0 when all are done', async () => {
    const r = await llmgw(['ctl', 'model', 'pull', 'tiny'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      `fetching hf://org/tiny-GGUF/tiny-Q4_K_M.gguf (${origins['tiny']?.commit?.slice(0, 7) ?? ''}) onto node-a, node-b`,
    );
    expect(lines).toContain(`node node-a: done (${Math.round(tiny.length / 1000)} kB)`);
    expect(lines).toContain(`node node-b: done (${Math.round(tiny.length / 1000)} kB)`);
    expect(lines.at(-1)).toBe('model tiny is on 2 nodes');
    for (const d of dirs)
      expect(
        existsSync(
          join(
            d,
            'models',
            'hub',
            'models--org--tiny-GGUF',
            'snapshots',
            origins['tiny']?.commit ?? '',
            'tiny-Q4_K_M.gguf',
          ),
        ),
      ).toBe(true);
  });

  it('prints JSON lines with --json, onto the node named', async () => {
    const r = await llmgw(['ctl', 'model', 'pull', 'tiny', '--node', 'node-b', '--json'], env);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.every((l) => l['node'] === 'node-b' && l['model'] === 'tiny')).toBe(true);
    expect(lines.at(-1)).toMatchObject({
      state: 'done',
      done: tiny.length,
      total: tiny.length,
      source: 'hf://org/tiny-GGUF/tiny-Q4_K_M.gguf',
    });
  });

  it('exits 1 with each node’s error when a download fails', async () => {
    const r = await llmgw(['ctl', 'model', 'pull', 'missing', '--node', 'node-a'], env);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^node node-a: failed: /m);
    expect(r.stderr).toMatch(/^error: model missing could not be fetched onto node node-a: .*404/m);
  });

  it('refuses a node it does not know, with the name it was likely meant to be', async () => {
    const r = await llmgw(['ctl', 'model', 'pull', 'tiny', '--node', 'node-c'], env);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'error: no node is named "node-c"; did you mean "node-a"? (llmgw ctl nodes lists them)',
    );
  });

  it('leaves the downloads running on Ctrl-C, and says so', async () => {
    const d = startDaemon(['ctl', 'model', 'pull', 'slow', '--node', 'node-a'], env);
    await d.waitFor(/node node-a: (queued|downloading)/);
    const code = await d.stop('SIGINT');
    expect(code).toBe(130);
    expect(d.output()).toContain(
      'stopped watching: the downloads go on on the nodes (llmgw ctl model pull slow shows them again, without fetching anything twice)',
    );
    const left = await api(t.url, t.adminKey, 'GET', '/models/slow/downloads');
    expect(left.body.nodes).toEqual([
      expect.objectContaining({ node: 'node-a', state: expect.stringMatching(/queued|downloading/) }),
    ]);
  });

  it("lists each node's cache as a table, and as JSON", async () => {
    const text = await llmgw(['ctl', 'cache', '--node', 'node-a'], env);
    expect(text.code).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(
      /^node node-a: \/.+\/models\/hub, \d+ kB in \d snapshots?, [\d.]+ [kMGT]B free$/,
    );
    expect(lines[1]).toMatch(/^SOURCE\s+SNAPSHOT\s+MODELS\s+FILES\s+SIZE\s+LAST USED$/);
    expect(lines.find((l) => l.startsWith('hf://org/tiny-GGUF'))).toMatch(
      new RegExp(
        `^hf://org/tiny-GGUF\\s+${origins['tiny']?.commit?.slice(0, 7) ?? ''}\\s+tiny\\s+1\\s+${Math.round(tiny.length / 1000)} kB\\s+\\d+s ago$`,
      ),
    );

    const json = await llmgw(['ctl', 'cache', '--json'], env);
    const view = JSON.parse(json.stdout) as {
      nodes: { node: string; entries: { source: string; models: string[] }[] }[];
    };
    expect(view.nodes.map((n) => n.node).sort()).toEqual(['node-a', 'node-b']);
    for (const n of view.nodes)
      expect(n.entries.find((e) => e.source === 'hf://org/tiny-GGUF')).toMatchObject({ models: ['tiny'] });
  });

  it('removes a model and its files on every node with rm --purge', async () => {
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'extra',
      source: '/models/extra.gguf',
      replicas: 0,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    expect(added.status).toBe(201);
    expect((await llmgw(['ctl', 'model', 'pull', 'extra'], env)).code).toBe(0);
    const snapshot = (d: string) =>
      join(d, 'models', 'hub', 'models--org--extra-GGUF', 'snapshots', origins['extra']?.commit ?? '');
    for (const d of dirs) expect(existsSync(snapshot(d))).toBe(true);

    const r = await llmgw(['ctl', 'model', 'rm', 'extra', '--purge'], env);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'model "extra" removed',
      "its files are being removed from nodes node-a, node-b (files a running engine uses are kept, and each node's log says which)",
    ]);
    const end = Date.now() + 5000;
    while (dirs.some((d) => existsSync(snapshot(d))) && Date.now() < end)
      await new Promise((res) => setTimeout(res, 20));
    for (const d of dirs) expect(existsSync(snapshot(d))).toBe(false);
    // The other model's files stay.
    for (const d of dirs) expect(existsSync(join(d, 'models', 'hub', 'models--org--tiny-GGUF'))).toBe(true);
  });
});
