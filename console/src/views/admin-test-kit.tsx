/** For the admin views' tests: an Api over a scripted fetch that records each call, and a render. */
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render } from '@testing-library/react';
import type { ReactNode } from 'react';

import { Api } from '../api.js';
import { SessionProvider } from '../session.js';

export interface Call {
  method: string;
  /** The path under /api/v1, with its query. */
  path: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** An answer: JSON (status 200 unless given), or a raw Response. */
export type Answer = Response | { status?: number; json: unknown };

export function refusal(status: number, code: string, message: string, issues?: unknown[]): Answer {
  return { status, json: { error: { code, message, ...(issues === undefined ? {} : { issues }) } } };
}

export function scriptedApi(answer: (call: Call) => Answer | undefined): { api: Api; calls: Call[] } {
  const calls: Call[] = [];
  const api = new Api({
    key: 'k',
    fetch: (input, init) => {
      const call: Call = {
        method: init?.method ?? 'GET',
        path: (input as string).replace('/api/v1', ''),
        headers: { ...(init?.headers as Record<string, string> | undefined) },
        body: typeof init?.body === 'string' ? init.body : undefined,
      };
      calls.push(call);
      const a = answer(call) ?? refusal(404, 'not_found', `no ${call.method} ${call.path}`);
      return Promise.resolve(
        a instanceof Response
          ? a
          : new Response(JSON.stringify(a.json), {
              status: a.status ?? 200,
              headers: { 'content-type': 'application/json' },
            }),
      );
    },
  });
  return { api, calls };
}

export function renderAs(api: Api, ui: ReactNode, role: 'admin' | 'user' = 'admin') {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return render(
    <QueryClientProvider client={client}>
      <SessionProvider session={{ api, name: 'root', role, signOut: () => undefined }}>{ui}</SessionProvider>
    </QueryClientProvider>,
  );
}
