// The fake engine of bench:routing: its prefix cache, its queue and its metrics, as the
// bench's figures rely on them.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  engineBlocks,
  loadMetricsOf,
  SimEngine,
  templated,
  type SimEngineOptions,
} from '../bench/routing-engine.mjs';
import { Gateway } from '../src/gateway/gateway.js';
import { parseLoad } from '../src/gateway/router/prometheus.js';
import type { RoutingPolicy } from '../src/gateway/router/types.js';
import { nodeRequest } from '../src/http1/client-io.js';

const system = 'You answer questions about the manual. '.repeat(100); // ~1000 tokens
const messages = (question: string) => [
  { role: 'system', content: system },
  { role: 'user', content: question },
];

async function chat(
  url: string,
  question: string,
  key = 'k',
): Promise<{ status: number; ttft: number; text: string }> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim', messages: messages(question), max_tokens: 20, stream: true }),
  });
  const ttft = performance.now() - started;
  return { status: res.status, ttft, text: await res.text() };
}

describe('the routing bench’s fake engine', () => {
  const options: SimEngineOptions = {
    id: 'e',
    engine: 'vllm',
    slots: 1,
    cacheBlocks: 64,
    prefillMsPerToken: 0.05,
    decodeMsPerToken: 0.1,
    apiKey: 'k',
  };
  const engine = new SimEngine(options);
  let url: string;
  beforeAll(async () => {
    url = await engine.listen();
  });
  afterAll(() => engine.close());

  it('prefills only what its prefix cache lacks, streams the answer, and predicts a shorter wait for a cached prompt', async () => {
    const prompt = engineBlocks(templated(messages('what is a slot?')));
    const cold = engine.predictTtft(prompt);
    const first = await chat(url, 'what is a slot?');
    expect(first.status).toBe(200);
    expect(first.text).toContain('data: [DONE]');
    expect(engine.cachedTokens).toBe(0);
    expect(engine.predictTtft(prompt)).toBeLessThan(cold);
    await chat(url, 'and a block?');
    // The system prompt's whole blocks came from the cache the second time.
    const blocks = Math.floor(templated(messages('')).length / 256);
    expect(engine.cachedTokens).toBe(blocks * 64);
    expect(engine.promptTokens).toBeGreaterThan(engine.cachedTokens);
  });

  it('queues past its slots and says so in its own metrics format', async () => {
    const before = engine.requests;
    const both = [chat(url, 'one'), chat(url, 'two')];
    while (engine.requests < before + 2) await new Promise((resolve) => setTimeout(resolve, 1));
    const load = parseLoad(engine.metrics(), loadMetricsOf.vllm);
    expect(load).toMatchObject({ running: 1, waiting: 1 });
    await Promise.all(both);
    expect(parseLoad(engine.metrics(), loadMetricsOf.vllm)).toMatchObject({ running: 0, waiting: 0 });
    for (const kind of ['sglang', 'llamacpp'] as const) {
      const other = new SimEngine({ ...options, engine: kind });
      expect(parseLoad(other.metrics(), loadMetricsOf[kind])).toEqual(
        kind === 'llamacpp' ? { running: 0, waiting: 0 } : { running: 0, waiting: 0, kvUsage: 0 },
      );
    }
  });

  it('refuses a wrong key as the engines do', async () => {
    expect((await chat(url, 'x', 'wrong')).status).toBe(401);
  });
});

describe('the gateway in front of them', () => {
  const engines = [0, 1].map(
    (i) =>
      new SimEngine({
        id: `sim-${i}`,
        engine: 'vllm',
        slots: 4,
        cacheBlocks: 64,
        prefillMsPerToken: 0.01,
        decodeMsPerToken: 0.1,
        apiKey: `k${i}`,
      }),
  );
  beforeAll(async () => {
    for (const e of engines) await e.listen();
  });
  afterAll(async () => {
    for (const e of engines) await e.close();
  });

  /** The replicas that answered 6 requests on one system prompt, one after another, under a policy. */
  async function replicasFor(policy: RoutingPolicy): Promise<string[]> {
    const gateway = new Gateway({
      keys: {
        check: () => Promise.resolve({ name: 't', role: 'user', allowedModels: null, rpm: null, tpm: null }),
      },
      routes: {
        routeTable: () =>
          Promise.resolve({
            replicas: engines.map((e) => ({
              id: e.id,
              model: 'sim',
              engine: 'vllm',
              endpoint: e.url ?? '',
              apiKey: e.id === 'sim-0' ? 'k0' : 'k1',
              servedName: 'sim',
              adapters: [],
              capacity: 4,
              loadMetrics: loadMetricsOf.vllm,
              metricsUrl: `${e.url ?? ''}/metrics`,
              healthPath: '/health',
            })),
            models: [{ name: 'sim', adapters: [], engines: ['vllm'] }],
          }),
      },
      usage: { write: () => Promise.resolve() },
      logger: pino({ level: 'silent' }),
      routing: { policy },
    });
    await gateway.start();
    const front: Server = createServer((req, res) => gateway.handle(nodeRequest(req), res));
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const ids: string[] = [];
    try {
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'sim',
            messages: messages(`question ${i}`),
            max_tokens: 2,
            stream: true,
          }),
        });
        await res.text();
        ids.push(res.headers.get('x-llmgw-replica') ?? '?');
      }
    } finally {
      await gateway.stop();
      await new Promise((resolve) => front.close(resolve));
    }
    return ids;
  }

  it('sends requests on one system prompt to the replica holding it (ours), where round robin alternates', async () => {
    const ours = await replicasFor('ours');
    expect(new Set(ours).size).toBe(1);
    const rr = await replicasFor('round-robin');
    expect(new Set(rr).size).toBe(2);
  });
});
