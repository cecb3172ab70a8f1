// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';

import { Api, type GatewayModel } from '../api.js';
import { SessionProvider } from '../session.js';
import { Playground } from './playground.js';

afterEach(cleanup);

const secret = 'llmgw-secret-key-0123456789';
const models: GatewayModel[] = [
  { id: 'cold', ready_replicas: 0 },
  { id: 'tiny', ready_replicas: 1 },
  { id: 'tiny:sql', parent: 'tiny', ready_replicas: 1 },
];

interface Sent {
  url: string;
  auth: string | null;
  body: unknown;
  signal: AbortSignal | undefined;
}

/** A gateway answering /v1/models with `models` and each chat with the next of `answers`. */
function gateway(answers: (() => Response)[]) {
  const sent: Sent[] = [];
  const api = new Api({
    key: secret,
    fetch: (input, init) => {
      const url = input as string;
      const headers = new Headers(init?.headers);
      if (url === '/v1/models') return Promise.resolve(Response.json({ object: 'list', data: models }));
      sent.push({
        url,
        auth: headers.get('authorization'),
        body: JSON.parse(init?.body as string),
        signal: init?.signal ?? undefined,
      });
      const next = answers.shift();
      if (next === undefined) throw new Error('no answer scripted');
      return Promise.resolve(next());
    },
  });
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <SessionProvider session={{ api, name: 'dev', role: 'user', signOut: () => undefined }}>
        <Playground />
      </SessionProvider>
    </QueryClientProvider>,
  );
  return sent;
}

const sse = (events: unknown[]) =>
  events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join('');
const piece = (content: string, finish: string | null = null) => ({
  choices: [{ index: 0, delta: { content }, finish_reason: finish }],
});
const streamed = (text: string) => () =>
  new Response(text, { status: 200, headers: { 'content-type': 'text/event-stream' } });
const refusal = (status: number, code: string, message: string) => () =>
  Response.json({ error: { message, type: 'invalid_request_error', param: null, code } }, { status });

async function ask(text: string) {
  const box = await screen.findByLabelText('Message');
  await screen.findByRole('option', { name: 'tiny' });
  fireEvent.change(box, { target: { value: text } });
  fireEvent.click(screen.getByRole('button', { name: 'Send' }));
}

describe('Playground', () => {
  it('picks a model with a ready replica, streams the answer with its figures, and sends the settings', async () => {
    const sent = gateway([
      streamed(
        sse([
          piece('Hello'),
          piece(', world', 'stop'),
          { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } },
          '[DONE]',
        ]),
      ),
    ]);
    expect(await screen.findByRole('option', { name: 'cold (no ready replica)' })).toBeTruthy();
    expect(screen.getByLabelText<HTMLSelectElement>('Model').value).toBe('tiny');
    fireEvent.change(screen.getByLabelText('System prompt'), { target: { value: 'Be brief.' } });
    fireEvent.change(screen.getByLabelText('Temperature'), { target: { value: '0.2' } });
    fireEvent.change(screen.getByLabelText('Max tokens'), { target: { value: '32' } });
    await ask('Hi');

    const log = screen.getByRole('list', { name: 'Conversation' });
    await within(log).findByText('Hello, world');
    await within(log).findByText(/time to first token \d+ ms · .*3 tokens$/);
    expect(sent).toEqual([
      {
        url: '/v1/chat/completions',
        auth: `Bearer ${secret}`,
        body: {
          model: 'tiny',
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: 'Hi' },
          ],
          temperature: 0.2,
          max_tokens: 32,
          stream: true,
          stream_options: { include_usage: true },
        },
        signal: expect.any(AbortSignal) as AbortSignal,
      },
    ]);
    // The code to copy carries the settings and the conversation, never the key.
    const curl = screen.getByRole('heading', { name: 'curl' }).closest('.snippet')?.textContent ?? '';
    expect(curl).toContain('Bearer $LLMGW_KEY');
    expect(curl).toContain('"max_tokens": 32');
    expect(curl).toContain('"content": "Hi"');
    expect(curl).not.toContain('Hello, world');
    // With a next question typed, the code is of the request Send would make: the answer goes with it.
    fireEvent.change(screen.getByLabelText('Message'), { target: { value: 'And then?' } });
    const python =
      screen.getByRole('heading', { name: 'Python (openai)' }).closest('.snippet')?.textContent ?? '';
    expect(python).toContain('{"role": "assistant", "content": "Hello, world"},');
    expect(python).toContain('{"role": "user", "content": "And then?"},');
    expect(document.body.textContent).not.toContain(secret);
  });

  it.each([
    [
      'a model removed since the list was read (404)',
      refusal(404, 'model_not_found', 'model "tiny" does not exist; did you mean "tiny2"? (models: tiny2)'),
      'model "tiny" does not exist; did you mean "tiny2"? (models: tiny2)',
    ],
    [
      "the key's rate limit (429)",
      refusal(
        429,
        'rate_limit_exceeded',
        'key "dev" made its 10 requests per minute: retry after the window moves on, or ask an admin for a higher rpm',
      ),
      'key "dev" made its 10 requests per minute: retry after the window moves on, or ask an admin for a higher rpm',
    ],
    [
      'an error sent in the stream',
      streamed(
        sse([piece('Par'), { error: { message: 'replica tiny-1 stopped answering: connection reset' } }]),
      ),
      'replica tiny-1 stopped answering: connection reset',
    ],
  ])('shows the refusal in the chat, where the answer would be: %s', async (_name, answer, message) => {
    gateway([answer]);
    await ask('Hi');
    const log = screen.getByRole('list', { name: 'Conversation' });
    expect((await within(log).findByRole('alert')).textContent).toBe(message);
    // The chat goes on: the question can be sent again.
    fireEvent.change(screen.getByLabelText('Message'), { target: { value: 'again' } });
    expect(screen.getByRole<HTMLButtonElement>('button', { name: 'Send' }).disabled).toBe(false);
  });

  it('stops an answer in flight, keeping what came', async () => {
    let open: ReadableStreamDefaultController<Uint8Array> | undefined;
    const sent = gateway([
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            start(c) {
              open = c;
              c.enqueue(new TextEncoder().encode(sse([piece('Once upon')])));
            },
          }),
          { status: 200, headers: { 'content-type': 'text/event-stream' } },
        ),
    ]);
    await ask('Tell a story');
    const log = screen.getByRole('list', { name: 'Conversation' });
    await within(log).findByText('Once upon');
    expect(open).toBeDefined();
    fireEvent.click(screen.getByRole('button', { name: 'Stop' }));
    await within(log).findByText(/^stopped · time to first token/);
    expect(sent[0]?.signal?.aborted).toBe(true);
    await screen.findByRole('button', { name: 'Send' });
  });

  it('refuses a temperature out of range at the field, and does not send', async () => {
    const sent = gateway([]);
    await screen.findByRole('option', { name: 'tiny' });
    fireEvent.change(screen.getByLabelText('Temperature'), { target: { value: '3' } });
    fireEvent.change(screen.getByLabelText('Message'), { target: { value: 'Hi' } });
    expect(screen.getByRole('alert').textContent).toBe(
      "Temperature must be a number from 0 to 2, or empty for the engine's default",
    );
    const send = screen.getByRole<HTMLButtonElement>('button', { name: 'Send' });
    expect(send.disabled).toBe(true);
    fireEvent.keyDown(screen.getByLabelText('Message'), { key: 'Enter' });
    await waitFor(() => {
      expect(sent).toEqual([]);
    });
  });

  it('copies the code with the key as $LLMGW_KEY, and says so when the browser refuses', async () => {
    const copied: string[] = [];
    let refuse = false;
    Object.defineProperty(navigator, 'clipboard', {
      configurable: true,
      value: {
        writeText: (text: string) => {
          if (refuse) return Promise.reject(new Error('Write permission denied.'));
          copied.push(text);
          return Promise.resolve();
        },
      },
    });
    gateway([]);
    await screen.findByRole('option', { name: 'tiny' });
    fireEvent.change(screen.getByLabelText('Message'), { target: { value: 'Hi' } });
    fireEvent.click(screen.getByRole('button', { name: 'Copy the curl code' }));
    const curl = screen.getByRole('heading', { name: 'curl' }).closest('.snippet');
    expect(await within(curl as HTMLElement).findByText('Copied')).toBeTruthy();
    expect(copied).toHaveLength(1);
    expect(copied[0]).toContain('Bearer $LLMGW_KEY');
    expect(copied[0]).not.toContain(secret);
    refuse = true;
    fireEvent.click(screen.getByRole('button', { name: 'Copy the Python (openai) code' }));
    const python = screen.getByRole('heading', { name: 'Python (openai)' }).closest('.snippet');
    expect(
      await within(python as HTMLElement).findByText(
        'Could not copy (Write permission denied.): select the text and copy it',
      ),
    ).toBeTruthy();
  });
});
