import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { routeReplica } from '../../test/support/route-replica.js';
import { UpstreamPool } from '../http1/upstream-pool.js';
import type { RouteReplica } from '../protocol/routes.js';

import { poolHealth, ReplicaHealth } from './replica-health.js';

const replica = (id: string, endpoint = 'http://127.0.0.1:1'): RouteReplica =>
  routeReplica(id, { endpoint, apiKey: 'engine-key' });

describe('ReplicaHealth', () => {
  it('asks once for the failures that come while it asks, keeps the answer keepMs, then asks again', async () => {
    let clock = 0;
    const asked: string[] = [];
    let answer!: (status: number) => void;
    const health = new ReplicaHealth({
      keepMs: 1000,
      now: () => clock,
      get: (r) => {
        asked.push(r.id);
        return new Promise((resolve) => (answer = resolve));
      },
    });
    const a = replica('a');
    const first = [health.healthy(a), health.healthy(a)];
    clock = 5000; // a slow answer is still shared while it is awaited
    first.push(health.healthy(a));
    answer(200);
    expect(await Promise.all(first)).toEqual([true, true, true]);
    clock = 5999;
    expect(await health.healthy(a)).toBe(true);
    expect(asked).toEqual(['a']);
    clock = 6000;
    const again = health.healthy(a);
    answer(503);
    expect(await again).toBe(false);
    // Each replica its own question.
    const b = health.healthy(replica('b'));
    answer(0);
    expect(await b).toBe(false);
    expect(asked).toEqual(['a', 'a', 'b']);
  });
});

describe('poolHealth', () => {
  let server: Server;
  let url: string;
  const seen: { path: string; auth: string }[] = [];
  let status = 200;
  let hang = false;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ path: req.url ?? '', auth: req.headers.authorization ?? '' });
      if (hang) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('asks the health path under the endpoint with the engine key, and says what it answered', async () => {
    const pools = new Map<string, UpstreamPool>();
    const get = poolHealth((endpoint) => {
      let pool = pools.get(endpoint);
      if (pool === undefined) pools.set(endpoint, (pool = new UpstreamPool(endpoint)));
      return pool;
    });
    expect(await get(replica('a', `${url}/r/a`), { timeoutMs: 2000 })).toBe(200);
    expect(seen.at(-1)).toEqual({ path: '/r/a/health', auth: 'Bearer engine-key' });
    status = 503;
    expect(await get(replica('a', url), { timeoutMs: 2000 })).toBe(503);
    hang = true;
    const started = performance.now();
    expect(await get(replica('a', url), { timeoutMs: 200 })).toBe(0);
    expect(performance.now() - started).toBeLessThan(2000);
    // Nothing listens there.
    expect(await get(replica('gone', 'http://127.0.0.1:1'), { timeoutMs: 2000 })).toBe(0);
    for (const p of pools.values()) await p.close();
  });
});
