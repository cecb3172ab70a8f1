import { useState, type SyntheticEvent } from 'react';

import { Api, type WhoAmI } from './api.js';
import { consoleRefusal } from './session.js';

export interface SignInProps {
  /** The key checked and accepted, with who it is. */
  onSignedIn: (key: string, who: WhoAmI) => void;
  /** Tests pass a client over their own fetch. */
  makeApi?: (key: string) => Api;
  /** Why the last session ended, when the console ended it. */
  notice?: string;
}

/** Sign-in with an API key, checked with GET /api/v1/whoami; a refusal shows the server's message. */
export function SignIn({ onSignedIn, makeApi = (key) => new Api({ key }), notice }: SignInProps) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);

  const submit = async (e: SyntheticEvent<HTMLFormElement>) => {
    e.preventDefault();
    const typed = key.trim();
    if (typed === '') {
      setError('type an API key: an admin made it with llmgw ctl key create, or llmgw up printed one');
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      const who = await makeApi(typed).whoami();
      const refusal = consoleRefusal(who);
      if (refusal !== undefined) setError(refusal);
      else onSignedIn(typed, who);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="sign-in">
      <h1>llmgw</h1>
      {notice !== undefined && error === undefined && (
        <p role="status" className="error">
          {notice}
        </p>
      )}
      <form
        onSubmit={(e) => void submit(e)}
        aria-describedby={error === undefined ? undefined : 'sign-in-error'}
      >
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autoComplete="current-password"
          value={key}
          onChange={(e) => {
            setKey(e.target.value);
          }}
          aria-invalid={error !== undefined}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error !== undefined && (
          <p id="sign-in-error" role="alert" className="error">
            {error}
          </p>
        )}
      </form>
      <p className="hint">
        The key stays in this tab only (session storage) and is sent to this control plane alone.
      </p>
    </main>
  );
}
