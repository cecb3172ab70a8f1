import { randomBytes } from 'node:crypto';
import { link, open, readFile, rename, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/** Who holds a lock, as written in its file. */
export interface LockHolder {
  pid: number;
  host: string;
  token: string;
}

export interface LockOptions {
  /** How often the holder touches the file to say it is alive (default 5 s). */
  heartbeatMs?: number;
  /** A lock untouched for this long is abandoned, whoever wrote it (default 60 s). */
  staleMs?: number;
  /** How often a waiter looks again (default 200 ms). */
  pollMs?: number;
  signal?: AbortSignal | undefined;
  /** Called once, when the lock is found held by someone else. */
  onWait?: ((holder: LockHolder | undefined) => void) | undefined;
}

export interface HeldLock {
  release(): Promise<void>;
}

/** The tokens of the locks this process holds now: a lock file naming this pid with another token is an earlier process's. */
const heldHere = new Set<string>();

/**
 * A lock between processes sharing a data dir: the file is created with O_EXCL, so one
 * creator wins. A holder that died leaves its file behind; it is taken over when its
 * process is gone from this host, or when its heartbeat stopped (another host on a
 * shared disk, or a reused pid).
 */
export async function acquireLock(path: string, options: LockOptions = {}): Promise<HeldLock> {
  const heartbeatMs = options.heartbeatMs ?? 5_000;
  const staleMs = options.staleMs ?? 60_000;
  const pollMs = options.pollMs ?? 200;
  const me: LockHolder = { pid: process.pid, host: hostname(), token: randomBytes(8).toString('hex') };
  let told = false;
  for (;;) {
    options.signal?.throwIfAborted();
    if (await tryCreate(path, me)) return hold(path, me, heartbeatMs);
    const seen = await inspect(path);
    if (seen === 'gone') continue;
    if (isStale(seen, staleMs)) {
      await takeOver(path, seen.holder);
      continue;
    }
    if (!told) {
      told = true;
      options.onWait?.(seen.holder);
    }
    await sleep(pollMs, undefined, { signal: options.signal });
  }
}

/**
 * Creates the lock file with its holder already in it: written beside it, then linked into
 * place (a link fails if the name exists), so a process killed while taking the lock leaves
 * either no lock or a whole one, never an empty file that names no one to check for life.
 */
async function tryCreate(path: string, me: LockHolder): Promise<boolean> {
  const draft = `${path}.${me.token}.new`;
  const fh = await open(draft, 'wx');
  try {
    await fh.writeFile(JSON.stringify(me));
  } finally {
    await fh.close();
  }
  try {
    await link(draft, path);
    return true;
  } catch (e) {
    if (errno(e) === 'EEXIST') return false;
    throw e;
  } finally {
    await unlink(draft).catch(() => undefined);
  }
}

function hold(path: string, me: LockHolder, heartbeatMs: number): HeldLock {
  heldHere.add(me.token);
  const beat = setInterval(() => {
    const now = new Date();
    utimes(path, now, now).catch(() => undefined);
  }, heartbeatMs);
  // The heartbeat alone must not keep the agent running.
  beat.unref();
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      heldHere.delete(me.token);
      clearInterval(beat);
      // Only our own: had we been taken for dead, the file is now another holder's.
      const seen = await inspect(path);
      if (seen !== 'gone' && seen.holder?.token === me.token) await unlink(path).catch(() => undefined);
    },
  };
}

interface Seen {
  /** Undefined while its creator has yet to write it, or when it is not ours to read. */
  holder: LockHolder | undefined;
  ageMs: number;
}

async function inspect(path: string): Promise<Seen | 'gone'> {
  try {
    const [text, st] = await Promise.all([readFile(path, 'utf8'), stat(path)]);
    return { holder: parseHolder(text), ageMs: Date.now() - st.mtimeMs };
  } catch (e) {
    if (errno(e) === 'ENOENT') return 'gone';
    throw e;
  }
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== 'object' || v === null) return undefined;
    const { pid, host, token } = v as Record<string, unknown>;
    if (typeof pid !== 'number' || typeof host !== 'string' || typeof token !== 'string') return undefined;
    return { pid, host, token };
  } catch {
    return undefined;
  }
}

function isStale(seen: Seen, staleMs: number): boolean {
  if (seen.ageMs > staleMs) return true;
  const h = seen.holder;
  if (h === undefined || h.host !== hostname()) return false;
  // Our own pid, but not a lock we hold: an earlier process that had it. In a container every
  // start is pid 1 on the same hostname (a restarted pod), so "alive" would never be false.
  if (h.pid === process.pid) return !heldHere.has(h.token);
  return !alive(h.pid);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: alive, someone else's.
    return errno(e) === 'EPERM';
  }
}

/**
 * Removes an abandoned lock without removing a fresh one: two waiters that both judged it
 * stale would otherwise each delete it, the second deleting the first one's new lock. A
 * rename moves exactly one file; if that was not the one judged stale, it goes back.
 */
async function takeOver(path: string, stale: LockHolder | undefined): Promise<void> {
  const aside = `${path}.${randomBytes(6).toString('hex')}.stale`;
  try {
    await rename(path, aside);
  } catch (e) {
    if (errno(e) === 'ENOENT') return;
    throw e;
  }
  const moved = parseHolder(await readFile(aside, 'utf8').catch(() => ''));
  if (stale !== undefined && moved !== undefined && moved.token !== stale.token) {
    // link, unlike rename, fails rather than replace a lock created meanwhile.
    await link(aside, path).catch(() => undefined);
  }
  await unlink(aside).catch(() => undefined);
}

function errno(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string'
    ? e.code
    : undefined;
}
