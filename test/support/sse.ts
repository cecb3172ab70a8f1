/** A client of GET /api/v1/events over real HTTP (fetch's streamed body), for tests. */
export interface SseEvent {
  /** `message` where the block named none; `comment` for a `:` line (heartbeats). */
  event: string;
  data: unknown;
  retry?: number;
}

export interface SseClient {
  status: number;
  contentType: string | null;
  /** Every event so far, in order. */
  events: SseEvent[];
  /** Resolves with the first event (from the start) that matches, or rejects after `timeoutMs`. */
  next(match: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  /** The client goes away (aborts the request). */
  close(): void;
}

export async function subscribeEvents(base: string, key: string | undefined): Promise<SseClient> {
  const abort = new AbortController();
  const res = await fetch(`${base}/api/v1/events`, {
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
    signal: abort.signal,
  });
  const events: SseEvent[] = [];
  const waiters = new Set<() => void>();
  let buffer = '';
  const ended = (async () => {
    if (res.body === null) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          events.push(parseBlock(buffer.slice(0, end)));
          buffer = buffer.slice(end + 2);
        }
        for (const w of waiters) w();
      }
    } catch {
      // Aborted by close().
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    events,
    ended,
    close: () => abort.abort(),
    next: (match, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const found = events.find(match);
          if (found === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching event in ${timeoutMs} ms; got ${JSON.stringify(events)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
}

function parseBlock(block: string): SseEvent {
  const e: SseEvent = { event: 'message', data: undefined };
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) return { event: 'comment', data: line.slice(1).trim() };
    const colon = line.indexOf(':');
    const field = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') e.event = value;
    else if (field === 'data') e.data = JSON.parse(value) as unknown;
    else if (field === 'retry') e.retry = Number(value);
  }
  return e;
}
