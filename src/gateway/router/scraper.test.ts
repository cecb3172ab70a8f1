import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterEach, describe, expect, it } from 'vitest';

import type { LoadMetrics } from '../../engines/types.js';

import { Scraper, type ScrapeTarget } from './scraper.js';
import type { LoadReading, ScrapeFailureKind } from './types.js';
import { until } from '../../../test/support/timing.js';

const names: LoadMetrics = { running: 'llamacpp:requests_processing', waiting: 'llamacpp:requests_deferred' };
const key = 'engine-key-0123456789';

/** As a real llama-server answers with three requests in flight. */
const busy = `# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 3
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
`;

const servers: Server[] = [];
const scrapers: Scraper[] = [];
afterEach(async () => {
  for (const s of scrapers.splice(0)) s.stop();
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => {
            resolve();
          });
        }),
    ),
  );
});

/** A metrics server in this process; `hits` counts its requests, `open` those unanswered. */
async function metricsServer(
  handle: (req: IncomingMessage, res: ServerResponse) => void = (req, res) => {
    if (req.headers.authorization !== `Bearer ${key}`) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(busy);
  },
): Promise<{ url: string; hits: () => number; maxOpen: () => number; connections: () => number }> {
  let hits = 0;
  let connections = 0;
  let open = 0;
  let maxOpen = 0;
  const server = createServer((req, res) => {
    hits++;
    open++;
    maxOpen = Math.max(maxOpen, open);
    res.on('close', () => open--);
    handle(req, res);
  });
  server.on('connection', () => connections++);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/metrics`,
    hits: () => hits,
    maxOpen: () => maxOpen,
    connections: () => connections,
  };
}

/** A port where nothing listens. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface Events {
  readings: { id: string; reading: LoadReading }[];
  failures: { id: string; error: string; kind: ScrapeFailureKind }[];
}

function scraper(options: { intervalMs?: number; timeoutMs?: number } = {}): {
  scraper: Scraper;
  events: Events;
} {
  const events: Events = { readings: [], failures: [] };
  const s = new Scraper({
    intervalMs: options.intervalMs ?? 20,
    timeoutMs: options.timeoutMs ?? 1000,
    now: () => 4242,
    onReading: (id, reading) => events.readings.push({ id, reading }),
    onFailure: (id, error, kind) => events.failures.push({ id, error, kind }),
  });
  scrapers.push(s);
  return { scraper: s, events };
}

function target(id: string, metricsUrl: string, apiKey = key): ScrapeTarget {
  return { id, metricsUrl, apiKey, loadMetrics: names };
}

describe('Scraper', () => {
  it('sends the key and delivers readings stamped with the router clock', async () => {
    const server = await metricsServer();
    const { scraper: s, events } = scraper();
    s.setReplicas([target('r1', server.url)]);
    await until('five readings', () => events.readings.length >= 5);
    expect(events.readings[0]).toEqual({ id: 'r1', reading: { running: 3, waiting: 1, at: 4242 } });
    expect(events.failures).toEqual([]);
    // Kept alive: five scrapes, one connection.
    expect(server.connections()).toBe(1);
  });

  it('reports a wrong key, without the key in the message', async () => {
    const server = await metricsServer();
    const { scraper: s, events } = scraper();
    s.setReplicas([target('r1', server.url, 'wrong-key-0123456789')]);
    await until('a failure', () => events.failures.length >= 1);
    expect(events.failures[0]?.kind).toBe('status');
    expect(events.failures[0]?.error).toContain('answered 401');
    expect(events.failures[0]?.error).not.toContain('wrong-key');
    expect(events.readings).toEqual([]);
  });

  it('reports a refused connection as unreachable', async () => {
    const port = await closedPort();
    const { scraper: s, events } = scraper();
    s.setReplicas([target('gone', `http://127.0.0.1:${port}/metrics`)]);
    await until('two failures', () => events.failures.length >= 2);
    expect(events.failures[0]).toMatchObject({ id: 'gone', kind: 'unreachable' });
    expect(events.failures[0]?.error).toContain('ECONNREFUSED');
  });

  it('reports llama-server without --metrics, and a page without the load metrics, as no-metrics', async () => {
    const off = await metricsServer((_req, res) => {
      res.writeHead(501, { 'content-type': 'application/json' });
      res.end(
        '{"error":{"code":501,"message":"This server does not support metrics endpoint.","type":"not_supported_error"}}',
      );
    });
    const other = await metricsServer((_req, res) => {
      res.end('some_other_metric 1\n');
    });
    const { scraper: s, events } = scraper();
    s.setReplicas([target('off', off.url), target('other', other.url)]);
    await until(
      'failures of both',
      () => events.failures.some((f) => f.id === 'off') && events.failures.some((f) => f.id === 'other'),
    );
    expect(events.failures.find((f) => f.id === 'off')?.kind).toBe('no-metrics');
    const missing = events.failures.find((f) => f.id === 'other');
    expect(missing?.kind).toBe('no-metrics');
    expect(missing?.error).toContain('llamacpp:requests_processing');
  });

  it('times out a replica that does not answer, and keeps one scrape in flight at a time', async () => {
    const server = await metricsServer(() => {
      // never answers
    });
    const { scraper: s, events } = scraper({ intervalMs: 30, timeoutMs: 60 });
    s.setReplicas([target('slow', server.url)]);
    await until('three failures', () => events.failures.length >= 3);
    expect(events.failures[0]?.kind).toBe('timeout');
    expect(server.maxOpen()).toBe(1);
  });

  it('waits for a slow answer rather than stacking scrapes', async () => {
    const server = await metricsServer((_req, res) => {
      setTimeout(() => res.end(busy), 50);
    });
    const { scraper: s, events } = scraper({ intervalMs: 1 });
    s.setReplicas([target('r1', server.url)]);
    await until('three readings', () => events.readings.length >= 3);
    expect(server.maxOpen()).toBe(1);
  });

  it('scrapes new replicas at once and stops scraping removed ones', async () => {
    const a = await metricsServer();
    const b = await metricsServer();
    const { scraper: s, events } = scraper({ intervalMs: 10 });
    s.setReplicas([target('a', a.url)]);
    await until('a reading of a', () => events.readings.some((r) => r.id === 'a'));
    s.setReplicas([target('b', b.url)]);
    await until('a reading of b', () => events.readings.some((r) => r.id === 'b'));
    const aHits = a.hits();
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(a.hits()).toBeLessThanOrEqual(aHits + 1);
    expect(b.hits()).toBeGreaterThan(2);
  });

  it('stops every loop', async () => {
    const server = await metricsServer();
    const { scraper: s, events } = scraper({ intervalMs: 10 });
    s.setReplicas([target('r1', server.url)]);
    await until('a reading', () => events.readings.length >= 1);
    s.stop();
    const hits = server.hits();
    const readings = events.readings.length;
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(server.hits()).toBeLessThanOrEqual(hits + 1);
    expect(events.readings.length).toBe(readings);
  });

  it('takes an injected client', async () => {
    const urls: string[] = [];
    const events: Events = { readings: [], failures: [] };
    const s = new Scraper({
      now: () => 7,
      get: (url, options) => {
        urls.push(`${url} ${options.apiKey}`);
        return Promise.resolve({
          status: 200,
          body: 'llamacpp:requests_processing 2\nllamacpp:requests_deferred 0\n',
        });
      },
      onReading: (id, reading) => events.readings.push({ id, reading }),
      onFailure: (id, error, kind) => events.failures.push({ id, error, kind }),
    });
    scrapers.push(s);
    s.setReplicas([target('r1', 'http://engine:1/metrics')]);
    await until('a reading', () => events.readings.length >= 1);
    expect(urls[0]).toBe(`http://engine:1/metrics ${key}`);
    expect(events.readings[0]).toEqual({ id: 'r1', reading: { running: 2, waiting: 0, at: 7 } });
  });
});
