/**
 * Live updates: GET /api/v1/events as server-sent events, read with fetch (EventSource cannot
 * send the Authorization header). Each event names a topic; the queries of that topic are
 * invalidated, so the views that show them fetch again. Reconnects with backoff, quietly:
 * while the stream is missing (an older control plane) the views still load as they open.
 */
import type { QueryClient, QueryKey } from '@tanstack/react-query';

import { queryKeys, type Api } from './api.js';

export const topics = [
  'nodes',
  'replicas',
  'models',
  'rollouts',
  'traffic',
  'keys',
  'config',
  'usage',
] as const;
export type Topic = (typeof topics)[number];

/** What each topic's change makes stale. */
export const topicQueries: Record<Topic, readonly QueryKey[]> = {
  nodes: [queryKeys.nodes, queryKeys.status],
  // The status counts the devices replicas use, and lists downloads.
  replicas: [queryKeys.replicas, queryKeys.status, queryKeys.gatewayModels],
  models: [queryKeys.models, queryKeys.replicas, queryKeys.gatewayModels],
  rollouts: [queryKeys.rollouts, queryKeys.models],
  traffic: [queryKeys.traffic],
  keys: [queryKeys.keys],
  config: [queryKeys.config],
  // Usage queries are keyed [...queryKeys.usage, query]: the prefix marks every filter stale.
  usage: [queryKeys.usage],
};

export interface SseEvent {
  event: string;
  data: string;
}

/** An incremental parser of text/event-stream (https://html.spec.whatwg.org/#event-stream-interpretation). */
export class SseParser {
  #buffer = '';
  #event = '';
  #data: string[] = [];

  /** Feeds a decoded chunk; returns the events it completed. */
  push(chunk: string): SseEvent[] {
    this.#buffer += chunk;
    const out: SseEvent[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buffer);
      if (m === null) break;
      // A lone \r at the end may be the first half of \r\n: wait for the next chunk.
      if (m[0] === '\r' && m.index === this.#buffer.length - 1) break;
      const line = this.#buffer.slice(0, m.index);
      this.#buffer = this.#buffer.slice(m.index + m[0].length);
      if (line === '') {
        if (this.#data.length > 0 || this.#event !== '') {
          out.push({ event: this.#event === '' ? 'message' : this.#event, data: this.#data.join('\n') });
        }
        this.#event = '';
        this.#data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.#event = value;
      else if (field === 'data') this.#data.push(value);
    }
    return out;
  }
}

/** 1 s, doubling to 30 s; back to 1 s once a stream opens. */
export function backoffMs(attempt: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
}

function isTopic(s: string): s is Topic {
  return (topics as readonly string[]).includes(s);
}

export interface LiveOptions {
  api: Pick<Api, 'events'>;
  onTopic: (topic: Topic) => void;
  /** Called each time a stream opens: what changed while it was closed is unknown. */
  onOpen?: () => void;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}

/** Follows the event stream until `signal` aborts. Never throws: a failure waits and retries. */
export async function follow(o: LiveOptions, signal: AbortSignal): Promise<void> {
  const wait = o.sleep ?? sleep;
  let attempt = 0;
  while (!signal.aborted) {
    try {
      const res = await o.api.events(signal);
      const body = res.body;
      if (res.ok && body !== null) {
        attempt = 0;
        o.onOpen?.();
        const parser = new SseParser();
        const reader = body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const e of parser.push(value)) if (isTopic(e.event)) o.onTopic(e.event);
        }
      } else {
        await res.body?.cancel();
      }
    } catch {
      // Unreachable, or the stream broke: retried below, without a word (the views show errors).
    }
    // Narrowed by the loop's condition, though an await above may have aborted it.
    if ((signal as { aborted: boolean }).aborted) break;
    await wait(backoffMs(attempt++), signal);
  }
}

/** Invalidates the queries of each topic as its events arrive; returns a stop function. */
export function startLive(api: Pick<Api, 'events'>, client: QueryClient): () => void {
  const ac = new AbortController();
  const invalidate = (keys: readonly QueryKey[]) => {
    for (const queryKey of keys) void client.invalidateQueries({ queryKey });
  };
  let reopened = false;
  void follow(
    {
      api,
      onTopic: (t) => {
        invalidate(topicQueries[t]);
      },
      // The first open follows the views' own first fetch; a later one follows a gap.
      onOpen: () => {
        if (reopened) invalidate(Object.values(topicQueries).flat());
        reopened = true;
      },
    },
    ac.signal,
  );
  return () => {
    ac.abort();
  };
}
