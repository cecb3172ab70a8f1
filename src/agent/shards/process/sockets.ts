import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Who listens on which TCP port of this machine, from Linux's /proc: the kernel's table of
 * sockets (/proc/net/tcp and tcp6: port, state, owner uid, inode) and each process's open
 * files (/proc/PID/fd, where a socket reads `socket:[INODE]`). This is how the agent tells
 * an engine's own listening socket from another program's on the same port: an HTTP answer
 * alone does not say who gave it.
 */

export interface Listener {
  port: number;
  /** The socket's inode: the key into processes' open files. */
  inode: number;
  uid: number;
}

/** TCP_LISTEN in the kernel's state numbering, as the `st` column shows it. */
const LISTEN = '0A';

/** The listening sockets of one /proc/net/tcp or tcp6 text (header line and all). */
export function parseProcNetTcp(text: string): Listener[] {
  const out: Listener[] = [];
  for (const line of text.split('\n')) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== LISTEN) continue;
    const local = f[1] ?? '';
    const port = Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
    const uid = Number(f[7]);
    const inode = Number(f[9]);
    if (!Number.isInteger(port) || !Number.isInteger(inode) || inode <= 0) continue;
    out.push({ port, inode, uid: Number.isInteger(uid) ? uid : -1 });
  }
  return out;
}

/** Every listening TCP socket (IPv4 and IPv6) of this network namespace; undefined where there is no /proc/net/tcp. */
export function readListeners(): Listener[] | undefined {
  let any = false;
  const out: Listener[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    any = true;
    out.push(...parseProcNetTcp(text));
  }
  return any ? out : undefined;
}

/** The inode a `/proc/PID/fd/N` link names when it is a socket (`socket:[12345]`). */
export function socketInode(link: string): number | undefined {
  const m = /^socket:\[(\d+)\]$/.exec(link);
  return m === null ? undefined : Number(m[1]);
}

/** The sockets these processes hold open, by inode (processes gone or not ours to read give none). */
export function socketInodes(pids: Iterable<number>): Set<number> {
  const out = new Set<number>();
  for (const pid of pids) for (const inode of socketsOf(pid)) out.add(inode);
  return out;
}

function socketsOf(pid: number): number[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const fd of fds) {
    let link: string;
    try {
      link = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const inode = socketInode(link);
    if (inode !== undefined) out.push(inode);
  }
  return out;
}

/** A process that holds a socket, as a reason names it. */
export interface Holder {
  pid: number;
  /** The program's name (/proc/PID/comm): `python3`, `node`, `nginx`. */
  name: string;
}

/**
 * The first process (not in `skip`) holding one of `inodes`, by scanning every process's
 * open files: costly on a busy machine, so only called once a port is known to be taken.
 * Undefined when none that this agent may read holds it (another user's process, or one in
 * another PID namespace).
 */
export function findHolder(
  inodes: ReadonlySet<number>,
  skip: ReadonlySet<number> = new Set(),
): Holder | undefined {
  if (inodes.size === 0) return undefined;
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (skip.has(pid)) continue;
    if (!socketsOf(pid).some((inode) => inodes.has(inode))) continue;
    let comm = '';
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      // Gone since: the pid still says who it was.
    }
    return { pid, name: comm === '' ? 'unknown' : comm };
  }
  return undefined;
}

/** `another program (pid 4242, python3)`, or by its user when the agent cannot see the process. */
export function describeHolder(holder: Holder | undefined, listeners: readonly Listener[]): string {
  if (holder !== undefined) return `another program (pid ${holder.pid}, ${holder.name})`;
  const uids = [...new Set(listeners.map((l) => l.uid).filter((u) => u >= 0))];
  return uids.length === 0
    ? 'another program'
    : `another program (of uid ${uids.join(', ')}; this agent cannot see which)`;
}

/** Sorted ports as inclusive ranges: [20000, 20001, 20005] gives [[20000, 20001], [20005, 20005]]. */
export function toRanges(ports: Iterable<number>): [number, number][] {
  const sorted = [...new Set(ports)].sort((a, b) => a - b);
  const out: [number, number][] = [];
  for (const p of sorted) {
    const last = out.at(-1);
    if (last !== undefined && last[1] === p - 1) last[1] = p;
    else out.push([p, p]);
  }
  return out;
}

/** Who listens on a port: whether any of `own` does, and the sockets no process of `own` holds. */
export interface PortUse {
  ours: boolean;
  others: Listener[];
}

/** Undefined where this machine has no /proc/net/tcp to tell. */
export function portUse(port: number, own: Iterable<number>): PortUse | undefined {
  const all = readListeners();
  if (all === undefined) return undefined;
  const on = all.filter((l) => l.port === port);
  if (on.length === 0) return { ours: false, others: [] };
  const mine = socketInodes(own);
  return { ours: on.some((l) => mine.has(l.inode)), others: on.filter((l) => !mine.has(l.inode)) };
}
