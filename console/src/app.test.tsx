// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { App } from './app.js';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  sessionStorage.clear();
});

const json = (status: number, body: unknown) =>
  Promise.resolve(
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } }),
  );

function start(answer: (path: string) => Promise<Response>) {
  vi.stubGlobal('fetch', (input: string) => answer(input.replace('/api/v1', '')));
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <App />
    </QueryClientProvider>,
  );
}

describe('App', () => {
  it("shows a user key the views it may see, and no admin's", async () => {
    sessionStorage.setItem('llmgw.key', 'llmgw_user');
    start((path) =>
      path === '/whoami'
        ? json(200, { name: 'ana', role: 'user' })
        : json(404, { error: { code: 'not_found', message: `no ${path}` } }),
    );
    const nav = await screen.findByRole('navigation', { name: 'Views' });
    expect([...nav.querySelectorAll('a')].map((a) => a.textContent)).toEqual([
      'Overview',
      'Nodes',
      'Models',
      'Plan',
      'Replicas',
      'Playground',
    ]);
    expect(screen.getByText('(user)')).toBeTruthy();
  });

  it('signs out, saying why, when the key is refused while signed in (revoked)', async () => {
    sessionStorage.setItem('llmgw.key', 'llmgw_gone');
    const message =
      'the API key is not valid: it was revoked, or mistyped (an admin can make one with llmgw ctl key create)';
    start((path) =>
      path === '/whoami'
        ? json(200, { name: 'ops', role: 'admin' })
        : json(401, { error: { code: 'unauthenticated', message } }),
    );
    expect((await screen.findByRole('status')).textContent).toBe(`Signed out: ${message}`);
    expect(screen.getByLabelText('API key')).toBeTruthy();
    expect(sessionStorage.getItem('llmgw.key')).toBeNull();
  });
});
