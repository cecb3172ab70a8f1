/** A fake control plane for the views' tests: answers by `METHOD /path`, and records each request. */
import { Api } from '../api.js';

export interface Sent {
  method: string;
  path: string;
  body: unknown;
  signal: AbortSignal | undefined;
}

/** An answer: JSON with a status, or a Response made per request (a stream). */
export type Answer = { status?: number; json: unknown } | ((sent: Sent) => Response);

export function errorBody(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

export function fakeApi(answers: Record<string, Answer>): { api: Api; sent: Sent[] } {
  const sent: Sent[] = [];
  const api = new Api({
    key: 'k',
    fetch: (input, init) => {
      const url = new URL(input as string, 'http://cp.test');
      const method = init?.method ?? 'GET';
      const path = url.pathname.replace('/api/v1', '');
      const s: Sent = {
        method,
        path: `${path}${url.search}`,
        body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined,
        signal: init?.signal ?? undefined,
      };
      sent.push(s);
      const a = answers[`${method} ${path}`];
      if (a === undefined)
        return Promise.resolve(
          new Response(JSON.stringify(errorBody('not_found', `no ${method} ${path}`)), { status: 404 }),
        );
      if (typeof a === 'function') return Promise.resolve(a(s));
      return Promise.resolve(
        new Response(JSON.stringify(a.json), {
          status: a.status ?? 200,
          headers: { 'content-type': 'application/json' },
        }),
      );
    },
  });
  return { api, sent };
}
