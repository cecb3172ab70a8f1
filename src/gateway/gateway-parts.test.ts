import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import type { RouteReplica } from '../protocol/routes.js';

import { affinityKey, upstreamBody } from './upstream-body.js';
import { RateLimits } from './rate-limits.js';
import { SseRelay } from './sse-relay.js';
import { UsageRecorder, type UsageRow } from './usage-recorder.js';
import { scanUsage } from './usage-scan.js';

const replica = (engine: RouteReplica['engine']): RouteReplica => ({
  id: 'm-1',
  model: 'm',
  engine,
  endpoint: 'http://127.0.0.1:1',
  apiKey: 'k',
  servedName: 'Org/Model',
  adapters: ['sql', 'code'],
  capacity: 4,
  loadMetrics: { running: 'r', waiting: 'w' },
  metricsUrl: 'http://127.0.0.1:1/metrics',
  healthPath: '/health',
});

describe('gateway parts', () => {
  it('changes only the model name (and what an adapter or usage needs)', () => {
    const body = {
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function' }],
      extra: { a: 1 },
    };
    expect(JSON.parse(upstreamBody(body, replica('vllm'), undefined, false))).toEqual({
      ...body,
      model: 'Org/Model',
    });
    expect(JSON.parse(upstreamBody(body, replica('vllm'), 'code', false))).toEqual({
      ...body,
      model: 'code',
    });
    expect(JSON.parse(upstreamBody(body, replica('llamacpp'), 'code', false))).toEqual({
      ...body,
      model: 'Org/Model',
      lora: [{ id: 1, scale: 1 }],
    });
    expect(
      JSON.parse(
        upstreamBody(
          { ...body, stream: true, stream_options: { continuous_usage_stats: true } },
          replica('vllm'),
          undefined,
          true,
        ),
      ),
    ).toMatchObject({
      stream_options: { continuous_usage_stats: true, include_usage: true },
    });
  });

  it('keys conversations by session header, else by how they start', () => {
    const req = (headers: Record<string, string> = {}) => headers;
    expect(affinityKey(req({ 'x-session-id': 'abc' }), {})).toBe('s:abc');
    const a = affinityKey(req(), {
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'q1' },
        { role: 'assistant', content: 'a1' },
      ],
    });
    const b = affinityKey(req(), {
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'q1' },
        { role: 'assistant', content: 'other' },
        { role: 'user', content: 'q2' },
      ],
    });
    const c = affinityKey(req(), {
      messages: [
        { role: 'system', content: 'T' },
        { role: 'user', content: 'q1' },
      ],
    });
    expect(a).toBe(b);
    expect(a).not.toBe(c);
    expect(affinityKey(req(), { prompt: 'hello' })).toMatch(/^p:/);
    expect(affinityKey(req(), { input: 'x' })).toBeUndefined();
  });

  it('reads token counts from the end of an answer', () => {
    expect(
      scanUsage(
        '{"choices":[],"usage":{"completion_tokens":8,"prompt_tokens":11,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0}}}',
      ),
    ).toEqual({ prompt: 11, completion: 8 });
    expect(scanUsage('{"usage":{"input_tokens":3,"output_tokens":5}}')).toEqual({ prompt: 3, completion: 5 });
    expect(scanUsage('{"choices":[]}')).toBeUndefined();
  });

  it('relays a stream as it comes, timing tokens, and drops only the usage chunk it asked for', () => {
    let t = 0;
    const gaps: (number | undefined)[] = [];
    const relay = new SseRelay({ stripUsage: true, onToken: (g) => gaps.push(g), now: () => t });
    const role = 'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n';
    const tok = (s: string) => `data: {"choices":[{"delta":{"content":"${s}"}}]}\n\n`;
    const usage = 'data: {"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":5}}\n\n';
    const push = (s: string) => relay.push(Buffer.from(s))?.toString() ?? '';
    let out = push(role + tok('a').slice(0, 10));
    expect(out).toBe(role);
    t = 10;
    out = push(tok('a').slice(10) + tok('b'));
    expect(out).toBe(tok('a') + tok('b'));
    t = 30;
    out = push(usage.slice(0, 20));
    out += push(usage.slice(20) + 'data: [DONE]\n\n');
    expect(out).toBe('data: [DONE]\n\n');
    expect(relay.end()).toBeUndefined();
    expect(relay.usage).toEqual({ prompt: 5, completion: 2 });
    expect(relay.firstTokenAt).toBe(10);
    // One chunk, one observation: tokens that arrive together have no gap between them.
    expect(gaps).toEqual([undefined]);
  });

  it('passes a stream through untouched when the client asked for usage itself, still reading it', () => {
    const relay = new SseRelay({ stripUsage: false, onToken: () => undefined });
    const usage = 'data: {"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":5}}\n\n';
    expect(relay.push(Buffer.from(usage.slice(0, 30)))?.toString()).toBe(usage.slice(0, 30));
    expect(relay.push(Buffer.from(usage.slice(30)))?.toString()).toBe(usage.slice(30));
    relay.end();
    expect(relay.usage).toEqual({ prompt: 5, completion: 2 });
  });

  it('limits requests and tokens per minute, sliding, and says when to retry', () => {
    let now = 1_000_000;
    const limits = new RateLimits(() => now);
    const l = { rpm: 2, tpm: 100 };
    expect(limits.admit('k', l)).toBeUndefined();
    expect(limits.admit('k', l)).toBeUndefined();
    const refused = limits.admit('k', l);
    expect(refused?.message).toBe(
      'key "k" made its 2 requests per minute: retry after the window moves on, or ask an admin for a higher rpm',
    );
    expect(refused?.retryAfterS).toBe(60);
    now += 30_000;
    expect(limits.admit('k', l)).toBeDefined();
    now += 31_000;
    expect(limits.admit('k', l)).toBeUndefined();
    limits.charge('t', 150, { tpm: 100 });
    expect(limits.admit('t', { rpm: null, tpm: 100 })?.message).toContain('used its 100 tokens per minute');
    expect(limits.admit('free', { rpm: null, tpm: null })).toBeUndefined();
  });

  it('writes usage in batches, and keeps counts a failed write could not store', async () => {
    const written: UsageRow[][] = [];
    let fail = true;
    const rec = new UsageRecorder({
      sink: {
        write: (rows) => {
          if (fail) return Promise.reject(new Error('database away'));
          written.push(rows);
          return Promise.resolve();
        },
      },
      logger: pino({ level: 'silent' }),
      intervalMs: 60_000,
    });
    const at = Date.parse('2026-12-02T13:20:00Z');
    rec.record({ key: 'a', model: 'm', prompt: 3, completion: 4, at });
    await rec.flush();
    rec.record({ key: 'a', model: 'm', prompt: 1, completion: 1, at });
    fail = false;
    await rec.flush();
    expect(written).toEqual([
      [
        {
          key_name: 'a',
          model: 'm',
          hour: '2026-12-02T13:00:00.000Z',
          requests: 2,
          prompt_tokens: 4,
          completion_tokens: 5,
        },
      ],
    ]);
    await rec.stop();
  });
});
