/**
 * Who is signed in: the API key (kept in sessionStorage, so it goes with the tab) and its role,
 * which every view reads to show only what the key may do.
 */
import { createContext, useContext, type ReactNode } from 'react';

import type { Api, Role } from './api.js';

export interface Session {
  api: Api;
  name: string;
  role: Role;
  signOut: () => void;
}

const SessionContext = createContext<Session | undefined>(undefined);

export function SessionProvider({ session, children }: { session: Session; children: ReactNode }) {
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}

/** The signed-in session; views render only inside one. */
export function useSession(): Session {
  const s = useContext(SessionContext);
  if (s === undefined) throw new Error('useSession outside a SessionProvider');
  return s;
}

/** Renders its children for an admin key only: a user key never sees admin actions. */
export function AdminOnly({ children }: { children: ReactNode }) {
  return useSession().role === 'admin' ? <>{children}</> : null;
}

const storageKey = 'llmgw.key';

export const keyStore = {
  load(): string | undefined {
    return sessionStorage.getItem(storageKey) ?? undefined;
  },
  save(key: string): void {
    sessionStorage.setItem(storageKey, key);
  },
  clear(): void {
    sessionStorage.removeItem(storageKey);
  },
};

/** The console is for people: keys of the gateway and metrics roles are refused by name. */
export function consoleRefusal(who: { name: string; role: Role }): string | undefined {
  if (who.role === 'admin' || who.role === 'user') return undefined;
  return `key "${who.name}" has the ${who.role} role, which the console does not take: sign in with an admin or user key (llmgw ctl key create NAME --role user)`;
}
