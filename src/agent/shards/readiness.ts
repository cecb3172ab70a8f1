import http from 'node:http';
import https from 'node:https';

import type { ShardRun } from './types.js';
import { never, wait } from './wait.js';

/**
 * One look at an engine's health URL. Engines tell "loading" two ways (see
 * gpus-and-engines.md §D): llama-server listens at once and answers 503 until the model
 * is loaded; vLLM and SGLang accept no connection until they are ready.
 */

export type Health = NonNullable<ShardRun['health']>;

export type Probe =
  | { kind: 'ok' }
  | { kind: 'refused' }
  | { kind: 'status'; status: number; body: string }
  | { kind: 'error'; message: string };

/** How much of an unexpected answer's body goes into a reason. */
const BODY_CHARS = 200;

export function probeHealth(health: Health, timeoutMs: number): Promise<Probe> {
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(health.url);
    } catch {
      resolve({ kind: 'error', message: `${health.url} is not a URL` });
      return;
    }
    const headers: Record<string, string> = {};
    if (health.apiKey !== undefined) headers['authorization'] = `Bearer ${health.apiKey}`;
    const get = url.protocol === 'https:' ? https.get : http.get;
    // No keep-alive: a pooled socket to an engine that restarted would answer for the old one.
    const req = get(url, { headers, agent: false, timeout: timeoutMs }, (res) => {
      const status = res.statusCode ?? 0;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (body.length < BODY_CHARS) body += d;
      });
      res.on('end', () => {
        resolve(
          status === 200
            ? { kind: 'ok' }
            : { kind: 'status', status, body: body.trim().slice(0, BODY_CHARS) },
        );
      });
      res.on('error', (e) => {
        resolve({ kind: 'error', message: e.message });
      });
    });
    req.on('timeout', () => {
      req.destroy();
      resolve({ kind: 'error', message: `no answer within ${formatMs(timeoutMs)}` });
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      resolve(
        e.code === 'ECONNREFUSED' ? { kind: 'refused' } : { kind: 'error', message: e.code ?? e.message },
      );
    });
  });
}

/** The TCP port a health URL is asked on; undefined when it is not a URL. */
export function healthPort(health: Health): number | undefined {
  let url: URL;
  try {
    url = new URL(health.url);
  } catch {
    return undefined;
  }
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/** What a probe found, as the end of a sentence about the engine. */
export function describeProbe(probe: Probe, health: Health): string {
  switch (probe.kind) {
    case 'ok':
      return `${health.url} answers 200`;
    case 'refused':
      return `${health.url} refuses connections`;
    case 'status': {
      const hint =
        probe.status === 401 || probe.status === 403
          ? ' (the engine wants an API key the health check does not send)'
          : '';
      return `${health.url} answers ${probe.status}${probe.body === '' ? '' : ` ${probe.body}`}${hint}`;
    }
    case 'error':
      return `${health.url} fails: ${probe.message}`;
  }
}

/** Why a shard that is starting is not ready yet, after this probe. */
export function startingReason(probe: Probe, health: Health): string {
  if (probe.kind === 'status' && probe.status === 503 && health.loading === 'answers-503')
    return 'loading the model (the health check answers 503)';
  if (probe.kind === 'refused') {
    return health.loading === 'refuses-connections'
      ? 'loading the model (the engine accepts connections once it is ready)'
      : `waiting for the engine to listen (${health.url} refuses connections)`;
  }
  return `not ready yet: ${describeProbe(probe, health)}`;
}

/** `1.5 s`, `2 min`: durations in reasons. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/** Failed health checks in a row that make a ready shard restart. */
const HEALTH_FAILURES = 3;

/** Long enough for a busy engine, short enough to notice a hung one before the next probe. */
export function probeTimeout(intervalMs: number): number {
  return Math.min(5000, Math.max(1000, intervalMs));
}

/**
 * Checks a ready engine every `intervalMs` until it fails HEALTH_FAILURES checks in a row
 * (resolves with why, for the restart) or `signal` aborts (never resolves). Process and
 * container shards alike.
 */
export async function watchHealth(health: Health, intervalMs: number, signal: AbortSignal): Promise<string> {
  let failures = 0;
  for (;;) {
    if (!(await wait(intervalMs, signal))) return never();
    const probe = await probeHealth(health, probeTimeout(intervalMs));
    if (signal.aborted) return never();
    if (probe.kind === 'ok') {
      failures = 0;
      continue;
    }
    failures++;
    if (failures >= HEALTH_FAILURES)
      return `stopped answering its health check: ${describeProbe(probe, health)} (${failures} times in a row)`;
  }
}
