import { describe, expect, it } from 'vitest';

import { ChatStreamReader, readChatStream, readChunk, type StreamItem } from './playground-stream.js';

const chunk = (o: unknown) => JSON.stringify(o);

describe('readChunk', () => {
  it.each<[string, string, StreamItem[]]>([
    ['the end', '[DONE]', [{ kind: 'done' }]],
    [
      'the role alone (llama.cpp and vLLM open with it)',
      chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }),
      [],
    ],
    ['a piece of text', chunk({ choices: [{ delta: { content: 'Hel' } }] }), [{ kind: 'text', text: 'Hel' }]],
    [
      'the last piece with why it ended',
      chunk({ choices: [{ delta: { content: '.' }, finish_reason: 'length' }] }),
      [
        { kind: 'text', text: '.' },
        { kind: 'finish', reason: 'length' },
      ],
    ],
    [
      'the usage chunk (stream_options.include_usage), no choices',
      chunk({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 } }),
      [{ kind: 'usage', completionTokens: 12 }],
    ],
    ['usage null on every other chunk (vLLM)', chunk({ choices: [{ delta: {} }], usage: null }), []],
    [
      'an error sent mid-stream',
      chunk({ error: { message: 'replica r1 of tiny stopped answering', type: 'server_error' } }),
      [{ kind: 'error', message: 'replica r1 of tiny stopped answering' }],
    ],
    [
      'an error without a message, as sent',
      chunk({ error: { code: 500 } }),
      [{ kind: 'error', message: '{"code":500}' }],
    ],
    [
      'not JSON',
      'oops <html>',
      [{ kind: 'error', message: 'the gateway sent an event that is not JSON: oops <html>' }],
    ],
  ])('%s', (_name, data, items) => {
    expect(readChunk(data)).toEqual(items);
  });
});

describe('ChatStreamReader', () => {
  it('completes events split anywhere across reads, and skips comments and other event types', () => {
    const text = [
      ': keep-alive',
      '',
      `data: ${chunk({ choices: [{ delta: { content: 'Hi' } }] })}`,
      '',
      'event: ping',
      'data: {}',
      '',
      `data: ${chunk({ choices: [{ delta: { content: ' there' }, finish_reason: 'stop' }] })}`,
      '',
      'data: [DONE]',
      '',
      '',
    ].join('\r\n');
    for (const size of [1, 3, 7, 1000]) {
      const r = new ChatStreamReader();
      const items: StreamItem[] = [];
      for (let i = 0; i < text.length; i += size) items.push(...r.push(text.slice(i, i + size)));
      expect([size, items]).toEqual([
        size,
        [
          { kind: 'text', text: 'Hi' },
          { kind: 'text', text: ' there' },
          { kind: 'finish', reason: 'stop' },
          { kind: 'done' },
        ],
      ]);
    }
  });

  it('reads a byte stream whose UTF-8 characters are cut between reads', async () => {
    const bytes = new TextEncoder().encode(
      `data: ${chunk({ choices: [{ delta: { content: 'héllo ✓' } }] })}\n\n`,
    );
    const body = new ReadableStream<Uint8Array<ArrayBuffer>>({
      start(c) {
        for (let i = 0; i < bytes.length; i += 2) c.enqueue(bytes.slice(i, i + 2));
        c.close();
      },
    });
    const items: StreamItem[] = [];
    await readChatStream(body, (i) => items.push(i));
    expect(items).toEqual([{ kind: 'text', text: 'héllo ✓' }]);
  });
});

describe('readChatStream and a stop', () => {
  it('cancels the read and throws when the signal aborts, keeping the items that came', async () => {
    const body = new ReadableStream<Uint8Array<ArrayBuffer>>({
      start(c) {
        c.enqueue(new TextEncoder().encode(`data: ${chunk({ choices: [{ delta: { content: 'a' } }] })}\n\n`));
      },
    });
    const ac = new AbortController();
    const items: StreamItem[] = [];
    const reading = readChatStream(
      body,
      (i) => {
        items.push(i);
        ac.abort(new Error('stopped by the user'));
      },
      ac.signal,
    );
    await expect(reading).rejects.toThrow('stopped by the user');
    expect(items).toEqual([{ kind: 'text', text: 'a' }]);
  });
});
