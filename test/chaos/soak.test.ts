import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';

import type { ReplicaView } from '../../src/protocol/replica-views.js';
import { fakeLlamaServer } from '../fakes/engines/fake-engines.js';
import { startTestAgent } from '../support/agents.js';
import { api } from '../support/control-plane.js';
import { enginePorts, until } from '../support/fleet.js';
import { localModel } from '../support/local-model.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { seeded } from '../support/timing.js';

import { chaosReport, scaled } from './chaos.js';

// Issue 25 item 8: the main process grew 135 → 171 MB over three rounds of 2,000 requests.
// Rounds of the requests a cluster serves (chats, streamed and abandoned, API reads and
// writes, refusals) against `llmgw server` with two gateway workers, and the main process's
// memory after each: resident as it is, then its heap after a full collection and resident
// memory after that. Resident memory alone rises for many rounds and falls at a major
// collection (V8 collects lazily: 118 → 207 → 169 MB over 20 rounds of 2,000 without a forced
// one); what is left after a collection is what a leak would grow, and it stays level.

const rounds = scaled(8, 20);
const perRound = scaled(1000, 2000);
/** Rounds left out of the bounds: caches, pools, JIT and the heap growing to its working size. */
const warmup = Math.ceil(rounds / 3);
/**
 * Growth allowed from the end of the warm-up to the highest round after it, of each process's
 * heap after a full collection (it drifts by under 1 MB in the bounded run's rounds, and
 * varies by ±0.8 MB round to round in the long run's), and of resident memory after it
 * (Buffers and native memory, outside the heap; it steps by up to 3 MB as a process's
 * arenas grow). A leak of one kilobyte per API request, put in to try it, grew the main
 * process's heap by 2.6 MB after the bounded run's warm-up.
 */
const allowedHeapMb = scaled(1.5, 3);
const allowedRssMb = scaled(8, 12);
const parallel = 8;

/**
 * A process's heap and resident memory after a full collection, MB, asked through its
 * inspector (started with --inspect on a port of the OS's choosing): what stays after a
 * round, where resident memory as it is also holds garbage V8 has not collected yet.
 */
async function afterGc(inspector: string): Promise<{ heap: number; rss: number }> {
  const ws = new WebSocket(inspector);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let id = 0;
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const mine = ++id;
      const onMessage = (data: Buffer) => {
        const m = JSON.parse(data.toString()) as {
          id?: number;
          result?: Record<string, unknown>;
          error?: unknown;
        };
        if (m.id !== mine) return;
        ws.off('message', onMessage);
        if (m.error !== undefined) reject(new Error(JSON.stringify(m.error)));
        else resolve(m.result ?? {});
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    const got = await call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    });
    const usage = JSON.parse(String((got['result'] as { value?: unknown } | undefined)?.value)) as {
      heapUsed: number;
      rss: number;
    };
    const mb = (bytes: number) => Math.round(bytes / 104857.6) / 10;
    return { heap: mb(usage.heapUsed), rss: mb(usage.rss) };
  } finally {
    ws.close();
  }
}

/** A process's resident memory, MB (Linux /proc). */
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Math.round(Number(kb) / 102.4) / 10;
}

describe('soak: the main process over rounds of requests', () => {
  let dir: string;
  let server: ServerProcess;
  let key = '';
  let inspectors: string[] = [];
  const undo: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-soak-'));
    undo.push(() => rm(dir, { recursive: true, force: true }));
    const bin = join(dir, 'llama-server');
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`);
    chmodSync(bin, 0o755);
    const ports = await enginePorts();
    const config = [
      `placement: {ports: ${ports.first}-${ports.last}}`,
      'gateway: {workers: 2}',
      'agent:',
      '  heartbeat_ms: 500',
      '  engines:',
      '    llamacpp:',
      `      bin: ${bin}`,
    ].join('\n');
    server = await startServerProcess({
      config,
      env: {
        LLMGW_ENGINE_KEY_SECRET: 'soak-engine-key-secret-0123456789abcdef',
        // Its heap is read through the inspector (the workers get one each too, unused).
        NODE_OPTIONS: '--inspect=127.0.0.1:0',
      },
    });
    undo.push(() => server.cleanup());
    // The main process's first, then each worker's (they print theirs as they start).
    inspectors = [...server.output().matchAll(/Debugger listening on (ws:\/\/\S+)/g)].map((m) => m[1] ?? '');
    expect(inspectors).toHaveLength(3);
    const agent = await startTestAgent(server, 'node-1');
    undo.push(() => agent.stop());
    key = (await api(server.url, server.adminKey, 'POST', '/keys', { name: 'load', role: 'user' })).body
      .secret as string;
    const added = await api(server.url, server.adminKey, 'POST', '/models', {
      name: 'm',
      source: localModel(dir),
      context_length: 2048,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, env: { FAKE_LLAMA_TOKEN_MS: '0' } }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    await until('a ready replica of m', async () =>
      ((await api(server.url, server.adminKey, 'GET', '/replicas?model=m')).body.items as ReplicaView[]).find(
        (r) => r.state === 'ready',
      ),
    );
    await until('the gateway to serve m', async () => {
      const res = await chat(false);
      await res.text();
      return res.status === 200 ? true : undefined;
    });
  });
  afterAll(async () => {
    for (const u of undo.reverse()) await u().catch(() => undefined);
  });

  const chat = (stream: boolean, signal?: AbortSignal, model = 'm', bearer = key) =>
    fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model,
        messages: [{ role: 'user', content: 'soak' }],
        max_tokens: 8,
        ...(stream ? { stream: true } : {}),
      }),
      ...(signal === undefined ? {} : { signal }),
    });

  /** One request of the mix, by a draw in [0, 1); what it got, or why it failed. */
  const one = async (draw: number, n: number): Promise<string | undefined> => {
    const admin = server.adminKey;
    const expectStatus = async (res: Response | Promise<Response>, want: number, what: string) => {
      const r = await res;
      const text = await r.text();
      return r.status === want ? undefined : `${what}: ${r.status} ${text.slice(0, 200)}`;
    };
    if (draw < 0.35) return expectStatus(chat(false), 200, 'chat');
    if (draw < 0.45) return expectStatus(chat(true), 200, 'streamed chat');
    if (draw < 0.5) {
      // Abandoned mid-stream: the gateway and the engine let it go.
      const abort = new AbortController();
      const res = await chat(true, abort.signal);
      const reader = res.body?.getReader();
      await reader?.read();
      abort.abort();
      await reader?.cancel().catch(() => undefined);
      return res.status === 200 ? undefined : `abandoned chat: ${res.status}`;
    }
    if (draw < 0.55)
      return expectStatus(
        fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }),
        200,
        '/v1/models',
      );
    if (draw < 0.75) {
      const path = ['/models', '/replicas', '/nodes', '/status', '/keys'][n % 5] ?? '/models';
      const r = await api(server.url, admin, 'GET', path);
      return r.status === 200 ? undefined : `GET ${path}: ${r.status}`;
    }
    if (draw < 0.8) {
      const r = await api(server.url, admin, 'PATCH', '/keys/load', { rpm: n % 2 === 0 ? null : 1_000_000 });
      return r.status === 200 ? undefined : `PATCH /keys/load: ${r.status} ${JSON.stringify(r.body)}`;
    }
    if (draw < 0.85) {
      const name = `k-${n}`;
      const made = await api(server.url, admin, 'POST', '/keys', { name, role: 'user' });
      const gone = await api(server.url, admin, 'DELETE', `/keys/${name}`);
      return made.status === 201 && gone.status === 200
        ? undefined
        : `key ${name}: ${made.status} then ${gone.status}`;
    }
    if (draw < 0.9) {
      // The API's refusals: a user key on an admin route, a change with nothing in it.
      const r =
        n % 2 === 0
          ? await api(server.url, key, 'GET', '/keys')
          : await api(server.url, admin, 'PATCH', '/keys/load', {});
      const want = n % 2 === 0 ? 403 : 400;
      return r.status === want ? undefined : `API refusal: ${r.status} ${JSON.stringify(r.body)}`;
    }
    // The gateway's: a wrong key, a model nobody serves, a body that is not JSON.
    if (draw < 0.93) return expectStatus(chat(false, undefined, 'm', `${key}x`), 401, 'wrong key');
    if (draw < 0.96) return expectStatus(chat(false, undefined, 'nobody'), 404, 'unknown model');
    return expectStatus(
      fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: '{"model":',
      }),
      400,
      'broken JSON',
    );
  };

  it(`levels off: ${rounds} rounds of ${perRound} requests, the heap within ${allowedHeapMb} MB of the warm-up's end`, async () => {
    const random = seeded(25);
    // After each round: the main process's resident memory as it is, then every process's
    // heap and resident memory after a full collection (the main one, then each worker).
    const rss: number[] = [];
    const after = inspectors.map(() => ({ heap: [] as number[], rss: [] as number[] }));
    const failures: string[] = [];
    let n = 0;
    for (let round = 0; round < rounds; round++) {
      let left = perRound;
      const worker = async () => {
        while (left > 0) {
          left--;
          const i = n++;
          try {
            const problem = await one(random(), i);
            if (problem !== undefined) failures.push(`#${i} ${problem}`);
          } catch (e) {
            failures.push(`#${i} ${e instanceof Error ? e.message : String(e)}`);
          }
        }
      };
      await Promise.all(Array.from({ length: parallel }, worker));
      rss.push(rssMb(server.pid));
      for (const [k, inspector] of inspectors.entries()) {
        const m = await afterGc(inspector);
        after[k]?.heap.push(m.heap);
        after[k]?.rss.push(m.rss);
      }
    }
    const growth = (list: number[]) =>
      Math.round((Math.max(...list.slice(warmup)) - (list[warmup - 1] ?? 0)) * 10) / 10;
    const names = inspectors.map((_, k) => (k === 0 ? 'main' : `worker${k}`));
    const did: Record<string, string | number> = {
      rounds,
      requests_per_round: perRound,
      main_rss_mb: rss.join(' → '),
    };
    let heapOver = 0;
    let rssOver = 0;
    for (const [k, m] of after.entries()) {
      did[`${names[k]}_heap_after_gc_mb`] = m.heap.join(' → ');
      did[`${names[k]}_rss_after_gc_mb`] = m.rss.join(' → ');
      heapOver = Math.max(heapOver, growth(m.heap) - allowedHeapMb);
      rssOver = Math.max(rssOver, growth(m.rss) - allowedRssMb);
    }
    const line = chaosReport('soak', did, {
      failed_requests: failures.length,
      heap_mb_over_bound: Math.max(0, Math.round(heapOver * 10) / 10),
      rss_mb_over_bound: Math.max(0, Math.round(rssOver * 10) / 10),
    });
    expect(failures.slice(0, 5), line).toEqual([]);
    for (const [k, m] of after.entries()) {
      expect(growth(m.heap), `${names[k]}'s heap; ${line}`).toBeLessThanOrEqual(allowedHeapMb);
      expect(growth(m.rss), `${names[k]}'s resident memory; ${line}`).toBeLessThanOrEqual(allowedRssMb);
    }
  }, 900_000);
});
