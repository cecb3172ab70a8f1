// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { Api, type WhoAmI } from './api.js';
import { SignIn } from './sign-in.js';

afterEach(cleanup);

function answering(status: number, body: unknown) {
  const seen: { url: string; auth: string | null }[] = [];
  const makeApi = (key: string) =>
    new Api({
      key,
      fetch: (input, init) => {
        seen.push({ url: input as string, auth: new Headers(init?.headers).get('authorization') });
        return Promise.resolve(new Response(JSON.stringify(body), { status }));
      },
    });
  return { makeApi, seen };
}

function signIn(key: string, makeApi: (key: string) => Api) {
  const onSignedIn = vi.fn<(key: string, who: WhoAmI) => void>();
  render(<SignIn onSignedIn={onSignedIn} makeApi={makeApi} />);
  fireEvent.change(screen.getByLabelText('API key'), { target: { value: key } });
  fireEvent.click(screen.getByRole('button', { name: 'Sign in' }));
  return onSignedIn;
}

describe('SignIn', () => {
  it("shows the server's refusal of a key, and does not sign in", async () => {
    const message =
      'the API key is not valid: it was revoked, or mistyped (an admin can make one with llmgw ctl key create)';
    const { makeApi, seen } = answering(401, { error: { code: 'unauthenticated', message } });
    const onSignedIn = signIn('llmgw_bad', makeApi);
    expect((await screen.findByRole('alert')).textContent).toBe(message);
    expect(seen).toEqual([{ url: '/api/v1/whoami', auth: 'Bearer llmgw_bad' }]);
    expect(onSignedIn).not.toHaveBeenCalled();
    expect(screen.getByLabelText('API key').getAttribute('aria-invalid')).toBe('true');
  });

  it('refuses a metrics key by name: the console takes admin and user keys', async () => {
    const { makeApi } = answering(200, { name: 'prometheus', role: 'metrics' });
    const onSignedIn = signIn('llmgw_m', makeApi);
    expect((await screen.findByRole('alert')).textContent).toBe(
      'key "prometheus" has the metrics role, which the console does not take: sign in with an admin or user key (llmgw ctl key create NAME --role user)',
    );
    expect(onSignedIn).not.toHaveBeenCalled();
  });

  it('says what to type when nothing was, without asking the server', async () => {
    const { makeApi, seen } = answering(200, { name: 'x', role: 'admin' });
    signIn('  ', makeApi);
    expect((await screen.findByRole('alert')).textContent).toBe(
      'type an API key: an admin made it with llmgw ctl key create, or llmgw up printed one',
    );
    expect(seen).toEqual([]);
  });

  it('signs in a user key with who it is', async () => {
    const { makeApi } = answering(200, { name: 'ana', role: 'user' });
    const onSignedIn = signIn(' llmgw_ok ', makeApi);
    await vi.waitFor(() => {
      expect(onSignedIn).toHaveBeenCalledWith('llmgw_ok', { name: 'ana', role: 'user' });
    });
  });

  it('says when the control plane cannot be reached', async () => {
    const onSignedIn = signIn(
      'k',
      (key) => new Api({ key, fetch: () => Promise.reject(new TypeError('Failed to fetch')) }),
    );
    expect((await screen.findByRole('alert')).textContent).toBe(
      'cannot reach the control plane: Failed to fetch',
    );
    expect(onSignedIn).not.toHaveBeenCalled();
  });
});
