import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../src/catalog/model-spec.js';
import type { KDeployment } from '../src/kube/kube-types.js';
import { podWeights, productsByClass, workloadOf } from '../src/kube/manifests.js';
import type { Origin } from '../src/models/origin.js';
import { resolveOrigin } from '../src/models/resolve.js';
import { bytesText } from '../src/protocol/cache-views.js';

import { startFakeHub, type FakeHub } from './fakes/hub/hub.js';
import { llmgw, startDaemon } from './support/cli.js';
import { startTestHub, testRepos } from './support/hub.js';

// `llmgw fetch` as the init container of a Kubernetes pod runs it: the built CLI, with the
// arguments workloadOf writes, against the fake hub; the files must land where the engine's
// arguments (podWeights) read them.

const repo = 'Qwen/Qwen2.5-0.5B-Instruct-GGUF';
const quant = 'qwen2.5-0.5b-instruct-q4_k_m.gguf';
const source = `hf://${repo}/${quant}`;

describe('llmgw fetch', () => {
  let hub: FakeHub;
  let origin: Origin;
  const dirs: string[] = [];
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'llmgw-fetch-'));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    hub = await startTestHub();
    // What the control plane pins: the quant named, at main's commit.
    origin = await resolveOrigin(source, { fetch, endpoint: hub.url });
  });
  afterAll(async () => {
    await hub.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** The download init container's arguments, as the manifest writes them, for a cache at mount. */
  const initArgs = (mount: string): string[] => {
    const profile: ProfileSpec = {
      name: 'cpu',
      engine: 'llamacpp',
      cpu: true,
      tp: 1,
      pp: 1,
      gpus_per_node: 0,
      nodes: 1,
      args: [],
      env: {},
      adapters: [],
    };
    const model: ModelSpec = { name: 'qwen', source, replicas: 1, profiles: [profile] };
    const d = workloadOf({
      model,
      profile,
      origin,
      replicas: 1,
      settings: {
        namespace: 'llmgw',
        models: { pvc: '', mount_path: mount, downloader_image: 'llmgw:dev' },
        runtime_class: '',
        engine_port: 8000,
        service_account: '',
      },
      llamaParallel: 1,
      products: productsByClass([]),
    }) as KDeployment;
    const init = d.spec?.template.spec?.initContainers?.[0];
    expect(init?.command).toEqual(['llmgw']);
    return init?.args ?? [];
  };
  const fileGets = () => hub.requests.filter((r) => r.method === 'GET' && r.url.includes('/resolve/')).length;

  it('fetches the pinned quant where the engine reads it, and nothing on a second run', async () => {
    const mount = dir();
    const args = initArgs(mount);
    const first = await llmgw([...args, '--json'], { HF_ENDPOINT: hub.url });
    expect(first.stderr).toContain(`fetching ${source} at ${origin.commit ?? ''}`);
    expect(first.code).toBe(0);
    const summary = JSON.parse(first.stdout.trim()) as { snapshot: string; fetched_bytes: number };
    const weights = podWeights(origin, mount, source);
    expect(summary.snapshot).toBe(weights.path);
    expect(weights.files).toEqual([quant]);
    const expected = testRepos()[repo]?.files[quant] as Buffer;
    expect(readFileSync(join(weights.path, quant)).equals(expected)).toBe(true);
    expect(summary.fetched_bytes).toBe(expected.length);

    const gets = fileGets();
    const again = await llmgw([...args, '--json'], { HF_ENDPOINT: hub.url });
    expect(again.code).toBe(0);
    expect(again.stderr).toContain(
      `nothing to fetch, 1 file (${bytesText(expected.length)}) already in ${weights.path}`,
    );
    expect(JSON.parse(again.stdout.trim())).toMatchObject({ fetched_bytes: 0, snapshot: weights.path });
    expect(fileGets()).toBe(gets);
  });

  it('resolves a source itself when no origin is given', async () => {
    const mount = dir();
    const r = await llmgw(['fetch', source, '--into', mount, '--endpoint', hub.url]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(readFileSync(join(podWeights(origin, mount, source).path, quant)).length).toBeGreaterThan(0);
  });

  it('shows progress while a file arrives, stops on SIGTERM, and a restart fetches the rest', async () => {
    let release: () => void = () => undefined;
    const until = new Promise<void>((r) => {
      release = r;
    });
    const held = await startFakeHub({
      repos: testRepos(),
      separateFileServer: true,
      hold: { afterBytes: 100_000, until },
    });
    try {
      const mount = dir();
      const args = ['fetch', source, '--into', mount, '--origin', JSON.stringify(origin)];
      const d = startDaemon(args, { HF_ENDPOINT: held.url });
      // A first progress line after 1 s, as a pod's log shows it.
      await d.waitFor(/downloading hf:\/\/\S+: 100 kB of 264 kB/, 5000);
      expect(await d.stop('SIGTERM')).toBe(1);
      expect(d.output()).toContain(`error: fetching ${source} was cancelled`);
      release();
      const again = await llmgw([...args, '--json'], { HF_ENDPOINT: held.url });
      expect(again.code).toBe(0);
      const expected = testRepos()[repo]?.files[quant] as Buffer;
      expect(readFileSync(join(podWeights(origin, mount, source).path, quant)).equals(expected)).toBe(true);
    } finally {
      release();
      await held.close();
    }
  });

  it('refuses an unknown repository, a file the hub lacks, and an origin of another source', async () => {
    const unknown = await llmgw(['fetch', 'hf://org/nope', '--into', dir()], { HF_ENDPOINT: hub.url });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe(
      `error: the hub at ${hub.url} has no repository org/nope: check the name in hf://org/nope (a private one needs hub.token)\n`,
    );

    const gone: Origin = { ...origin, files: [{ path: 'gone.gguf', size: 10, sha256: 'd'.repeat(64) }] };
    const missing = await llmgw(['fetch', source, '--into', dir(), '--origin', JSON.stringify(gone)], {
      HF_ENDPOINT: hub.url,
    });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      `error: ${source}: gone.gguf: GET ${hub.url}/${repo}/resolve/${origin.commit ?? ''}/gone.gguf answered 404 Not Found`,
    );
    expect(missing.stderr).toContain(
      'the file is gone from where the origin says it was: resolve the model again',
    );

    const other = await llmgw([
      'fetch',
      'hf://org/repo',
      '--into',
      dir(),
      '--origin',
      JSON.stringify(origin),
    ]);
    expect(other.code).toBe(2);
    expect(other.stderr).toBe(
      `error: --origin is the origin of ${source}, not of hf://org/repo: give the same source\n`,
    );
  });
});
