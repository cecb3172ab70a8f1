import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useState, type ComponentType } from 'react';
import { Link, Route, Switch, useRoute } from 'wouter';

import { Api, ApiError, type WhoAmI } from './api.js';
import { startLive } from './live.js';
import { consoleRefusal, keyStore, SessionProvider, type Session } from './session.js';
import { SignIn } from './sign-in.js';
import { ThemeSelect } from './theme.js';
import { Nodes } from './views/nodes.js';
import { Models } from './views/models.js';
import { Overview } from './views/overview.js';
import { Plan } from './views/plan.js';
import { Audit } from './views/audit.js';
import { Keys } from './views/keys.js';
import { Settings } from './views/settings.js';
import { Usage } from './views/usage.js';
import { Replicas } from './views/replicas.js';
import { Playground } from './views/playground.js';

export interface View {
  path: string;
  title: string;
  /** Shown to admin keys only: the API refuses the rest. */
  admin?: boolean;
  /** Its path has pages under it (/models/NAME), routed by the view. */
  nest?: boolean;
  component: ComponentType;
}

/** The console's views, in the nav's order. A new view is a component here (see console/README.md). */
export const views: View[] = [
  { path: '/', title: 'Overview', component: Overview },
  { path: '/nodes', title: 'Nodes', component: Nodes },
  { path: '/models', title: 'Models', nest: true, component: Models },
  { path: '/plan', title: 'Plan', component: Plan },
  { path: '/replicas', title: 'Replicas', component: Replicas },
  { path: '/keys', title: 'Keys', admin: true, component: Keys },
  // GET /usage is for admin keys: a user key's own usage is not served to it.
  { path: '/usage', title: 'Usage', admin: true, component: Usage },
  { path: '/audit', title: 'Audit', admin: true, component: Audit },
  { path: '/settings', title: 'Settings', admin: true, component: Settings },
  { path: '/playground', title: 'Playground', component: Playground },
];

interface Signed {
  key: string;
  who: WhoAmI;
}

/** Signs in (or resumes this tab's key), then shows the views the key's role may see. */
export function App() {
  const [signed, setSigned] = useState<Signed | undefined>();
  const [resuming, setResuming] = useState(() => keyStore.load() !== undefined);
  const [notice, setNotice] = useState<string | undefined>();
  const signOut = useCallback((why?: string) => {
    keyStore.clear();
    setNotice(why);
    setSigned(undefined);
  }, []);

  useEffect(() => {
    const key = keyStore.load();
    if (key === undefined) return;
    // A key kept from before is checked again: it may have been revoked since.
    new Api({ key })
      .whoami()
      .then((who) => {
        if (consoleRefusal(who) === undefined) setSigned({ key, who });
        else keyStore.clear();
      })
      .catch(() => {
        keyStore.clear();
      })
      .finally(() => {
        setResuming(false);
      });
  }, []);

  if (resuming) return <p className="hint">Signing in…</p>;
  if (signed === undefined) {
    return (
      <SignIn
        {...(notice === undefined ? {} : { notice })}
        onSignedIn={(key, who) => {
          setNotice(undefined);
          keyStore.save(key);
          setSigned({ key, who });
        }}
      />
    );
  }
  return <Shell signed={signed} signOut={signOut} />;
}

function Shell({ signed, signOut }: { signed: Signed; signOut: (why?: string) => void }) {
  const client = useQueryClient();
  const session = useMemo<Session>(
    () => ({
      api: new Api({ key: signed.key }),
      name: signed.who.name,
      role: signed.who.role,
      signOut: () => {
        signOut();
      },
    }),
    [signed, signOut],
  );
  useEffect(() => startLive(session.api, client), [session, client]);
  // A key revoked while signed in: every view would fail alike, so the console signs out and says why.
  useEffect(
    () =>
      client.getQueryCache().subscribe((e) => {
        const error: unknown = e.query.state.error;
        if (e.type === 'updated' && error instanceof ApiError && error.status === 401) {
          signOut(`Signed out: ${error.message}`);
        }
      }),
    [client, signOut],
  );
  // Another key's answers must not show: the cache goes with the key.
  useEffect(
    () => () => {
      client.clear();
    },
    [client, signed],
  );
  const shown = views.filter((v) => v.admin !== true || session.role === 'admin');

  return (
    <SessionProvider session={session}>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">llmgw</span>
        <nav aria-label="Views">
          <ul>
            {shown.map((v) => (
              <NavItem key={v.path} view={v} />
            ))}
          </ul>
        </nav>
        <div className="who">
          <ThemeSelect />
          <span>
            {session.name} <span className="role">({session.role})</span>
          </span>
          <button type="button" onClick={session.signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Switch>
          {shown.map((v) => (
            <Route key={v.path} path={v.path} nest={v.nest === true} component={v.component} />
          ))}
          <Route>
            <NotFound />
          </Route>
        </Switch>
      </main>
    </SessionProvider>
  );
}

function NavItem({ view }: { view: View }) {
  // A nested view's pages (/models/NAME) keep it current in the nav.
  const [active] = useRoute(view.nest === true ? `${view.path}/*?` : view.path);
  return (
    <li>
      <Link href={view.path} aria-current={active ? 'page' : undefined}>
        {view.title}
      </Link>
    </li>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Not here</h1>
      <p className="hint">
        No view at this address, or not one this key&apos;s role may see. <Link href="/">Overview</Link>
      </p>
    </section>
  );
}
