import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';

import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { freePort } from '../../test/fakes/engines/fake-engines.js';
import { llama31_8b, tinyTensors } from '../../test/fakes/gguf/models.js';
import { writeGguf } from '../../test/fakes/gguf/writer.js';
import { startFakeHub, type FakeHub } from '../../test/fakes/hub/hub.js';
import { cpuModel, testEngines } from '../../test/support/assignments.js';
import { recordingLlamaServer } from '../../test/support/fleet.js';
import { resolveOrigin } from '../models/resolve.js';
import type { Origin } from '../models/origin.js';
import type {
  AgentMessage,
  AssignedShard,
  DownloadReport,
  ServerMessage,
  ShardStatusWire,
} from '../protocol/agent-protocol.js';

import { ShardExecutor, type ShardExecutorOptions } from './shard-executor.js';
import { Supervisor } from './shards/process/process-supervisor.js';
import { until } from '../../test/support/timing.js';

// The agent fetching a model's files for its shards and for pulls, with the real executor,
// supervisor, fetcher and a fake llama-server, from hub-shaped HTTP servers on this machine.

const commit = 'c0ffee'.padEnd(40, '0');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A GGUF the fake llama-server is given: a real header, a few small tensors. */
const weights = writeGguf({ metadata: llama31_8b, tensors: tinyTensors(256 * 1024) });
const projector = writeGguf({ metadata: [['general.architecture', { t: 'str', v: 'clip' }]] });
const readme = Buffer.from('# tiny\n');
/** Another model's file: its own bytes, so no blob of it is one of tiny's. */
const otherFile = writeGguf({ metadata: [['general.architecture', { t: 'str', v: 'other' }]] });

const files = {
  'tiny-Q4_K_M.gguf': weights,
  'mmproj-tiny-f16.gguf': projector,
  'README.md': readme,
};

function originOf(repo: string, fs: Record<string, Buffer> = files): Origin {
  return {
    source: `hf://${repo}`,
    kind: 'hf',
    repo,
    revision: commit,
    commit,
    files: Object.entries(fs).map(([path, b]) => ({ path, size: b.length, sha256: sha256(b) })),
  };
}

interface Served {
  path: string;
  range: string | undefined;
  bytes: number;
}

/**
 * The hub's resolve URLs (`/ORG/REPO/resolve/COMMIT/PATH`), answering ranges, that a test
 * drives: a file held after some bytes until released, a byte corrupted, a failure first.
 */
async function startFileHub(repos: Record<string, Record<string, Buffer>>) {
  const served: Served[] = [];
  const holds = new Map<string, { at: number; release: Promise<void>; open: () => void }>();
  const corrupt = new Map<string, number>();
  const failures = new Map<string, number>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const m = /^\/([^/]+\/[^/]+)\/resolve\/[0-9a-f]{40}\/(.+)$/.exec(req.url ?? '');
    const file = m === null ? undefined : repos[m[1] ?? '']?.[decodeURIComponent(m[2] ?? '')];
    const path = m?.[2] ?? '';
    if (file === undefined) {
      res.writeHead(404, { 'x-error-code': 'EntryNotFound' }).end();
      return;
    }
    const failing = failures.get(path) ?? 0;
    if (failing > 0) {
      failures.set(path, failing - 1);
      res.writeHead(500).end('try again');
      return;
    }
    let body = file;
    const bad = corrupt.get(path) ?? 0;
    if (bad !== 0) {
      corrupt.set(path, bad - 1);
      body = Buffer.from(file);
      body[body.length >> 1] = (body[body.length >> 1] ?? 0) ^ 0xff;
    }
    const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    const start = r === null ? 0 : Number(r[1]);
    const end = r === null || r[2] === '' ? file.length - 1 : Number(r[2]);
    const part = body.subarray(start, end + 1);
    const entry: Served = { path, range: req.headers.range, bytes: 0 };
    served.push(entry);
    res.writeHead(r === null ? 200 : 206, {
      'content-length': part.length,
      'accept-ranges': 'bytes',
      ...(r === null ? {} : { 'content-range': `bytes ${start}-${end}/${file.length}` }),
    });
    const hold = holds.get(path);
    if (hold === undefined || hold.at <= start) {
      entry.bytes = part.length;
      res.end(part);
      return;
    }
    // Once: the next request for it is served whole.
    holds.delete(path);
    const first = part.subarray(0, hold.at - start);
    entry.bytes = first.length;
    res.write(first);
    void hold.release.then(() => {
      if (res.destroyed) return;
      entry.bytes += part.length - first.length;
      res.end(part.subarray(first.length));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    /** The next request for `path` sends `at` bytes, then waits for the returned release. */
    hold(path: string, at: number): () => void {
      let open!: () => void;
      const release = new Promise<void>((resolve) => (open = resolve));
      holds.set(path, { at, release, open });
      return open;
    },
    corrupt(path: string, times: number) {
      corrupt.set(path, times);
    },
    fail(path: string, times: number) {
      failures.set(path, times);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const h of holds.values()) h.open();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const engines = testEngines(1);
const model = cpuModel;

async function shard(replica: string, name: string, origin: Origin): Promise<AssignedShard> {
  return {
    replica,
    model: model(name, origin.source),
    profile: 'cpu',
    rank: 0,
    ranks: 1,
    port: await freePort(),
    devices: [],
    threads: 1,
    api_key: 'llmgw_engine_test',
    origin,
  };
}

interface Node {
  exec: ShardExecutor;
  sent: AgentMessage[];
  dir: string;
  logs: () => string;
  launches: () => { args: string[]; env: Record<string, string> }[];
  statuses: (key: string) => ShardStatusWire[];
  downloads: () => DownloadReport[][];
  assign: (shards: AssignedShard[], hubUrl: string) => void;
}

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** An agent's executor on a data dir (a new one unless given: a restart uses the same). */
function node(o: { dir?: string; models?: ShardExecutorOptions['models'] } = {}): Node {
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), 'llmgw-weights-'));
  const rec = recordingLlamaServer(mkdtempSync(join(tmpdir(), 'llmgw-weights-rec-')));
  const sent: AgentMessage[] = [];
  let text = '';
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _e, cb) {
        text += chunk.toString();
        cb();
      },
    }),
  );
  const late: { exec?: ShardExecutor } = {};
  const supervisor = new Supervisor({
    logDir: join(dir, 'logs'),
    onStatus: () => late.exec?.report(),
    backoff: { initialMs: 60_000, maxMs: 60_000 },
  });
  const exec = new ShardExecutor({
    dataDir: dir,
    logger,
    supervisor,
    localBins: { llamacpp: rec.bin },
    inventory: () => undefined,
    send: (m) => {
      sent.push(m);
      return true;
    },
    bindHost: '127.0.0.1',
    models: { reportMs: 100, retry: { initialMs: 200, maxMs: 200 }, ...o.models },
  });
  late.exec = exec;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await exec.stop();
  };
  cleanup.push(stop);
  if (o.dir === undefined) cleanup.unshift(() => rmSync(dir, { recursive: true, force: true }));
  return {
    exec,
    sent,
    dir,
    logs: () => text,
    launches: rec.launches,
    statuses: (key) =>
      sent.flatMap((m) => (m.type === 'shards' ? m.statuses.filter((s) => s.key === key) : [])),
    downloads: () => sent.flatMap((m) => (m.type === 'downloads' ? [m.downloads] : [])),
    assign: (shards, hubUrl) =>
      exec.handle({
        type: 'assign',
        shards,
        engines,
        weights: { mirror: false, hub_endpoint: hubUrl, catalog_blobs: [] },
      } satisfies ServerMessage),
  };
}

const lastState = (n: Node, key: string) => n.statuses(key).at(-1);
const ready = (n: Node, key: string) => until(`${key} ready`, () => lastState(n, key)?.state === 'ready');

describe('an agent fetching the files of its shards', () => {
  let hub: Awaited<ReturnType<typeof startFileHub>>;
  beforeAll(async () => {
    hub = await startFileHub({ 'org/tiny': files, 'org/other': { 'other.gguf': otherFile } });
  });
  afterAll(async () => {
    await hub.close();
  });
  const servedOf = (path: string, from = 0) => hub.served.slice(from).filter((s) => s.path === path);

  it('goes downloading (with progress), then starting, then ready, the engine given the snapshot paths', async () => {
    const n = node();
    const origin = originOf('org/tiny');
    const release = hub.hold('tiny-Q4_K_M.gguf', weights.length >> 1);
    const s = await shard('tiny-1', 'tiny', origin);
    n.assign([s], hub.url);

    const downloading = await until('progress reported', () =>
      n.statuses('tiny-1/0').find((x) => x.state === 'downloading' && (x.download?.done ?? 0) > 0),
    );
    expect(downloading.download?.total).toBe(weights.length + projector.length + readme.length);
    expect(downloading.reason).toMatch(
      /^downloading hf:\/\/org\/tiny \([\d.]+ k?B of \d+ kB(, [\d.]+ [kM]?B\/s, \d+ s left)?\)$/,
    );
    // Reported every reportMs or so while it runs, not per chunk.
    const reports = n.statuses('tiny-1/0').length;
    await sleep(500);
    expect(n.statuses('tiny-1/0').length - reports).toBeLessThanOrEqual(8);
    release();

    await ready(n, 'tiny-1/0');
    const states = n.statuses('tiny-1/0').map((x) => x.state);
    expect(states.indexOf('downloading')).toBeLessThan(states.indexOf('starting'));
    expect(states.indexOf('starting')).toBeLessThan(states.indexOf('ready'));

    const snapshot = join(n.dir, 'models', 'hub', 'models--org--tiny', 'snapshots', commit);
    const [launch] = n.launches();
    expect(launch?.args.slice(0, 2)).toEqual(['--model', join(snapshot, 'tiny-Q4_K_M.gguf')]);
    expect(launch?.args[launch.args.indexOf('--mmproj') + 1]).toBe(join(snapshot, 'mmproj-tiny-f16.gguf'));
    expect(launch?.env).toMatchObject({ HF_HUB_OFFLINE: '1', HF_HUB_CACHE: join(n.dir, 'models', 'hub') });
    // A link into the blobs, holding the bytes the origin names.
    expect(lstatSync(join(snapshot, 'tiny-Q4_K_M.gguf')).isSymbolicLink()).toBe(true);
    expect(readFileSync(realpathSync(join(snapshot, 'tiny-Q4_K_M.gguf')))).toEqual(weights);

    // Its last use, for the cache's eviction.
    const usage = JSON.parse(readFileSync(join(n.dir, 'agent', 'cache-usage.json'), 'utf8')) as {
      snapshots: Record<string, { last_used: string; models: string[] }>;
    };
    expect(usage.snapshots[`models--org--tiny/snapshots/${commit}`]).toEqual({
      last_used: expect.any(String),
      models: ['tiny'],
    });
  });

  it('resumes a download cut in the middle after the agent restarts, with a range request', async () => {
    const first = node();
    const origin = originOf('org/tiny');
    const before = hub.served.length;
    const half = weights.length >> 1;
    hub.hold('tiny-Q4_K_M.gguf', half);
    first.assign([await shard('tiny-1', 'tiny', origin)], hub.url);
    const blob = join(first.dir, 'models', 'hub', 'models--org--tiny', 'blobs', sha256(weights));
    await until(
      'half the file on disk',
      () => existsSync(`${blob}.incomplete`) && statSync(`${blob}.incomplete`).size >= half,
    );
    await first.exec.stop();
    expect(existsSync(blob)).toBe(false);

    // The same data dir, as a restarted agent has it: it starts from its saved assignment.
    const second = node({ dir: first.dir });
    second.exec.resume();
    await ready(second, 'tiny-1/0');
    const asked = servedOf('tiny-Q4_K_M.gguf', before);
    expect(asked).toHaveLength(2);
    expect(asked[1]?.range).toMatch(new RegExp(`^bytes=(\\d+)-`));
    expect(Number(/^bytes=(\d+)-/.exec(asked[1]?.range ?? '')?.[1])).toBeGreaterThanOrEqual(half);
    expect(asked.reduce((t, s) => t + s.bytes, 0)).toBe(weights.length);
    expect(readFileSync(blob)).toEqual(weights);
  });

  it('catches a corrupted byte and fetches the file once more', async () => {
    const n = node();
    const before = hub.served.length;
    hub.corrupt('tiny-Q4_K_M.gguf', 1);
    n.assign([await shard('tiny-1', 'tiny', originOf('org/tiny'))], hub.url);
    await ready(n, 'tiny-1/0');
    expect(servedOf('tiny-Q4_K_M.gguf', before).map((s) => s.bytes)).toEqual([
      weights.length,
      weights.length,
    ]);
    expect(n.logs()).toContain(sha256(weights));
  });

  it('fails the shard, with both digests, when the bytes are wrong twice', async () => {
    const n = node({ models: { retry: { initialMs: 60_000, maxMs: 60_000 } } });
    hub.corrupt('tiny-Q4_K_M.gguf', 2);
    n.assign([await shard('tiny-1', 'tiny', originOf('org/tiny'))], hub.url);
    const failed = await until('failed', () => n.statuses('tiny-1/0').find((s) => s.state === 'failed'));
    expect(failed.reason).toMatch(
      new RegExp(
        `^could not fetch hf://org/tiny: tiny-Q4_K_M\\.gguf: fetched twice, and twice its sha256 was not the origin's ${sha256(weights)}: first [0-9a-f]{64}, then [0-9a-f]{64}; .*; trying again in 60 s$`,
      ),
    );
    expect(n.launches()).toEqual([]);
  });

  it('refuses a disk too small, saying what it needs and what is free where', async () => {
    const n = node({
      models: {
        fetcher: { freeBytes: () => Promise.resolve(1000) },
        retry: { initialMs: 60_000, maxMs: 60_000 },
      },
    });
    const before = hub.served.length;
    n.assign([await shard('tiny-1', 'tiny', originOf('org/tiny'))], hub.url);
    const failed = await until('failed', () => n.statuses('tiny-1/0').find((s) => s.state === 'failed'));
    const need = Math.round((weights.length + projector.length + readme.length) / 1000);
    expect(failed.reason).toBe(
      `hf://org/tiny needs ${need} kB more on disk, and 1.0 kB is free at ${join(n.dir, 'models', 'hub')}: free space there, set agent.models.max_gb lower so the cache keeps less, or choose a smaller model; trying again in 60 s`,
    );
    expect(hub.served.length).toBe(before);
  });

  it('tries a failed download again later, and then starts the engine', async () => {
    const n = node({ models: { fetcher: { fetchDefaults: { retries: 0 } } } });
    hub.fail('README.md', 1);
    n.assign([await shard('tiny-1', 'tiny', originOf('org/tiny'))], hub.url);
    const failed = await until('failed', () => n.statuses('tiny-1/0').find((s) => s.state === 'failed'));
    expect(failed.reason).toMatch(
      /^could not fetch hf:\/\/org\/tiny: .*README\.md.*500.*; trying again in 0 s$/,
    );
    await ready(n, 'tiny-1/0');
  });

  it('fetches each file once for two replicas of one model', async () => {
    const n = node();
    const before = hub.served.length;
    const origin = originOf('org/tiny');
    const release = hub.hold('tiny-Q4_K_M.gguf', 1000);
    n.assign([await shard('tiny-1', 'tiny', origin), await shard('tiny-2', 'tiny', origin)], hub.url);
    await until('both downloading', () =>
      ['tiny-1/0', 'tiny-2/0'].every((k) => lastState(n, k)?.state === 'downloading'),
    );
    release();
    await ready(n, 'tiny-1/0');
    await ready(n, 'tiny-2/0');
    expect(
      hub.served
        .slice(before)
        .map((s) => s.path)
        .sort(),
    ).toEqual(Object.keys(files).sort());
  });

  it('pulls a model ahead of placement, reporting its progress, and shares the download with a shard', async () => {
    const n = node();
    const origin = originOf('org/tiny');
    const before = hub.served.length;
    const release = hub.hold('tiny-Q4_K_M.gguf', weights.length >> 1);
    // Where files come from is known from the first assignment, which comes before any pull.
    n.assign([], hub.url);
    n.exec.handle({ type: 'pull', model: 'tiny', origin });
    const moving = await until('progress', () =>
      n
        .downloads()
        .flat()
        .find((d) => d.state === 'downloading' && d.done > 0),
    );
    expect(moving).toMatchObject({
      model: 'tiny',
      source: 'hf://org/tiny',
      commit,
      total: weights.length + projector.length + readme.length,
    });
    // A shard of the model now waits for the same download.
    n.assign([await shard('tiny-1', 'tiny', origin)], hub.url);
    await until('shard downloading', () => lastState(n, 'tiny-1/0')?.state === 'downloading');
    release();
    const done = await until('done', () =>
      n
        .downloads()
        .at(-1)
        ?.find((d) => d.state === 'done'),
    );
    expect(done).toMatchObject({ model: 'tiny', done: done.total, rate_bps: 0 });
    await ready(n, 'tiny-1/0');
    expect(hub.served.slice(before).filter((s) => s.path === 'tiny-Q4_K_M.gguf')).toHaveLength(1);

    // Pulled again: nothing to fetch, done at once.
    const again = hub.served.length;
    n.exec.handle({ type: 'pull', model: 'tiny', origin });
    await sleep(300);
    expect(hub.served.length).toBe(again);
    expect(
      n
        .downloads()
        .at(-1)
        ?.find((d) => d.model === 'tiny')?.state,
    ).toBe('done');
  });

  it('lists its cache: source, snapshot, models, files, size and last use', async () => {
    const n = node();
    n.assign([await shard('tiny-1', 'tiny', originOf('org/tiny'))], hub.url);
    await ready(n, 'tiny-1/0');
    n.exec.handle({ type: 'cache_list', request: 'r1' });
    const answer = await until('cache', () =>
      n.sent.find(
        (m): m is Extract<AgentMessage, { type: 'cache' }> => m.type === 'cache' && m.request === 'r1',
      ),
    );
    expect(answer).toMatchObject({
      root: join(n.dir, 'models', 'hub'),
      free_bytes: expect.any(Number),
      entries: [
        {
          source: 'hf://org/tiny',
          snapshot: commit,
          models: ['tiny'],
          files: 3,
          bytes: weights.length + projector.length + readme.length,
          last_used: expect.any(String),
        },
      ],
    });
    expect(answer.error).toBeUndefined();
  });

  it('purges what no running engine uses, and says what it kept', async () => {
    const n = node();
    const tiny = originOf('org/tiny');
    const other = originOf('org/other', { 'other.gguf': otherFile });
    n.assign([await shard('tiny-1', 'tiny', tiny)], hub.url);
    n.exec.handle({ type: 'pull', model: 'other', origin: other });
    await ready(n, 'tiny-1/0');
    await until('other fetched', () =>
      n
        .downloads()
        .at(-1)
        ?.find((d) => d.model === 'other' && d.state === 'done'),
    );
    const hubDir = join(n.dir, 'models', 'hub');
    expect(readdirSync(hubDir).sort()).toEqual(['models--org--other', 'models--org--tiny']);

    await n.exec.weights.purge('gone', [tiny, other]);
    expect(existsSync(join(hubDir, 'models--org--other', 'snapshots', commit))).toBe(false);
    expect(existsSync(join(hubDir, 'models--org--other', 'blobs', sha256(otherFile)))).toBe(false);
    expect(readFileSync(join(hubDir, 'models--org--tiny', 'snapshots', commit, 'tiny-Q4_K_M.gguf'))).toEqual(
      weights,
    );
    expect(n.logs()).toContain(
      'kept the files of hf://org/tiny (model gone was removed): tiny runs on them here',
    );
    expect(n.logs()).toContain('purged the files of model gone (hf://org/other): removed 1 file');
  });

  it('keeps its cache within agent.models.max_gb: files no shard uses go', async () => {
    // Less than the files of the one shard: the others go, the shard's stay, and the log says so.
    const n = node({ models: { maxBytes: 1000 } });
    const other = originOf('org/other', { 'other.gguf': otherFile });
    n.assign([], hub.url);
    n.exec.handle({ type: 'pull', model: 'other', origin: other });
    const hubDir = join(n.dir, 'models', 'hub');
    const otherBlob = join(hubDir, 'models--org--other', 'blobs', sha256(otherFile));
    await until('other fetched', () =>
      n
        .downloads()
        .at(-1)
        ?.find((d) => d.model === 'other' && d.state === 'done'),
    );
    expect(existsSync(otherBlob)).toBe(true);
    n.assign([await shard('tiny-1', 'tiny', originOf('org/tiny'))], hub.url);
    await ready(n, 'tiny-1/0');
    await until('other evicted', () => !existsSync(otherBlob));
    expect(readFileSync(join(hubDir, 'models--org--tiny', 'blobs', sha256(weights)))).toEqual(weights);
    await until('the rest said', () =>
      n.logs().includes('over agent.models.max_gb (1.0 kB): the rest is in use'),
    );
  });
});

const hubToken = 'hf_agent_download_token_0123456789';

describe('an agent fetching from the fake Hugging Face hub', () => {
  let fake: FakeHub;
  beforeAll(async () => {
    fake = await startFakeHub({
      repos: {
        'org/tiny-GGUF': { files: { ...files } },
        'org/gated-GGUF': { files: { ...files }, gated: true, granted: [hubToken] },
      },
    });
  });
  afterAll(async () => {
    await fake.close();
  });

  it('fetches the resolved origin through the hub redirect, once per file, and starts the engine on it', async () => {
    const origin = await resolveOrigin('hf://org/tiny-GGUF/tiny-Q4_K_M.gguf', { fetch, endpoint: fake.url });
    expect(origin.files.map((f) => f.path).sort()).toEqual(['mmproj-tiny-f16.gguf', 'tiny-Q4_K_M.gguf']);
    const n = node();
    const before = fake.requests.length;
    n.assign([await shard('tiny-1', 'tiny', origin)], fake.url);
    await ready(n, 'tiny-1/0');
    const snapshot = join(n.dir, 'models', 'hub', 'models--org--tiny-GGUF', 'snapshots', origin.commit ?? '');
    expect(n.launches()[0]?.args.slice(0, 2)).toEqual(['--model', join(snapshot, 'tiny-Q4_K_M.gguf')]);
    const gets = fake.requests
      .slice(before)
      .filter((r) => r.method === 'GET' && r.url.startsWith('/lfs-files/'));
    expect(gets).toHaveLength(2);
  });

  it("fetches a gated repository with the hub token, which the engine's environment never has", async () => {
    const origin = await resolveOrigin('hf://org/gated-GGUF/tiny-Q4_K_M.gguf', {
      fetch,
      endpoint: fake.url,
      token: hubToken,
    });
    // The agent's own HF_TOKEN, as `llmgw up` has it: the engines' base env is read from it now.
    vi.stubEnv('HF_TOKEN', hubToken);
    const n = node();
    vi.unstubAllEnvs();
    const before = fake.requests.length;
    n.exec.handle({
      type: 'assign',
      shards: [await shard('gated-1', 'gated', origin)],
      engines,
      weights: { mirror: false, hub_endpoint: fake.url, hub_token: hubToken, catalog_blobs: [] },
    } satisfies ServerMessage);
    await ready(n, 'gated-1/0');
    const sent = fake.requests.slice(before).filter((r) => r.method === 'GET' && r.server === 'hub');
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((r) => r.authorization === `Bearer ${hubToken}`)).toBe(true);
    const [launch] = n.launches();
    expect(launch?.env).toMatchObject({ HF_HUB_OFFLINE: '1' });
    expect(launch?.env).not.toHaveProperty('HF_TOKEN');
    expect(Object.values(launch?.env ?? {}).join('\n')).not.toContain(hubToken);
  });
});
