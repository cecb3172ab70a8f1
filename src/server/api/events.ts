import { Hono } from 'hono';

import { topicsFor, type EventData, type EventHub, type EventTopic } from '../events/event-hub.js';
import { principalOf, type ApiEnv } from './context.js';

export interface EventsRouteOptions {
  events: Pick<EventHub, 'subscribe'>;
  /** A comment line this often, so proxies and the client see the stream is alive. */
  heartbeatMs?: number;
  /** The reconnection delay suggested to EventSource (`retry:`). */
  retryMs?: number;
}

/** One server-sent event: `event:` and one `data:` line of JSON (JSON.stringify writes no newline). */
export function sseEvent(topic: string, data: EventData | object): string {
  return `event: ${topic}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * GET /events: the topics this key's role may read, as server-sent events
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html). The first event,
 * `ready`, lists them; each later one says what changed, for the client to read again.
 */
export function eventsRoute(o: EventsRouteOptions): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const heartbeatMs = o.heartbeatMs ?? 15_000;
  app.get('/', (c) => {
    const topics: EventTopic[] = topicsFor(principalOf(c).role);
    const encoder = new TextEncoder();
    let stop = (): void => undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        let open = true;
        const write = (text: string): void => {
          if (open) controller.enqueue(encoder.encode(text));
        };
        const heartbeat = setInterval(() => write(': heartbeat\n\n'), heartbeatMs);
        heartbeat.unref();
        let unsubscribe = (): void => undefined;
        stop = () => {
          if (!open) return;
          open = false;
          clearInterval(heartbeat);
          unsubscribe();
          c.req.raw.signal.removeEventListener('abort', stop);
        };
        write(`retry: ${o.retryMs ?? 3000}\n\n`);
        write(sseEvent('ready', { topics }));
        // The server stops: the body ends, and the connection with it (Connection: close).
        const end = (): void => {
          if (!open) return;
          stop();
          controller.close();
        };
        unsubscribe = o.events.subscribe(topics, (topic, data) => write(sseEvent(topic, data)), end);
        c.req.raw.signal.addEventListener('abort', stop);
      },
      // The client went away: node-server cancels the body (and aborts the request's signal).
      cancel() {
        stop();
      },
    });
    return new Response(body, {
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        // The stream holds its connection to the end; once ended, closed (a stopping server waits for none).
        connection: 'close',
        // nginx buffers answers unless told not to: events would arrive in bursts.
        'x-accel-buffering': 'no',
      },
    });
  });
  return app;
}
