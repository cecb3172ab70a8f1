import { describe, expect, it } from 'vitest';

import { backoffMs, follow, SseParser, type Topic } from './live.js';

describe('SseParser', () => {
  it('reads events split anywhere across chunks, with comments and CRLF', () => {
    const p = new SseParser();
    const text =
      ': hello\r\nevent: nodes\r\ndata: {}\r\n\r\nevent: replicas\ndata: {"id":"r1"}\ndata: 2\n\ndata: plain\n\n';
    const out = [];
    for (const ch of text) out.push(...p.push(ch));
    expect(out).toEqual([
      { event: 'nodes', data: '{}' },
      { event: 'replicas', data: '{"id":"r1"}\n2' },
      { event: 'message', data: 'plain' },
    ]);
  });
});

describe('follow', () => {
  it('retries quietly with backoff while the stream is missing, then follows its topics', async () => {
    const ac = new AbortController();
    const waits: number[] = [];
    const seen: Topic[] = [];
    let opened = 0;
    let calls = 0;
    const stream = (text: string) =>
      new Response(
        new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode(text));
            c.close();
          },
        }),
        { status: 200, headers: { 'content-type': 'text/event-stream' } },
      );
    await follow(
      {
        api: {
          events: () => {
            calls++;
            if (calls === 1) return Promise.reject(new TypeError('Failed to fetch'));
            if (calls === 2) return Promise.resolve(new Response('{"error":{}}', { status: 404 }));
            if (calls === 3)
              return Promise.resolve(
                stream('event: nodes\ndata: {}\n\nevent: bogus\ndata: {}\n\nevent: keys\ndata: {}\n\n'),
              );
            ac.abort();
            return Promise.reject(new DOMException('aborted', 'AbortError'));
          },
        },
        onTopic: (t) => seen.push(t),
        onOpen: () => opened++,
        sleep: (ms) => {
          waits.push(ms);
          return Promise.resolve();
        },
      },
      ac.signal,
    );
    expect(seen).toEqual(['nodes', 'keys']);
    expect(opened).toBe(1);
    // Two failures back off 1 s, 2 s; the stream that opened and ended starts again at 1 s.
    expect(waits).toEqual([1000, 2000, 1000]);
  });

  it('backs off to 30 s at most', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 20].map(backoffMs)).toEqual([
      1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000,
    ]);
  });
});
