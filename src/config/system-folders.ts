import { existsSync, realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * Folders of the operating system (Linux and macOS): llmgw keeps no data in them or under them,
 * so that a settings file naming one, by a slip or on purpose, is refused rather than acted on.
 * `/usr/local` is the machine's own software, not the system's.
 */
const systemTrees = [
  '/etc',
  '/usr',
  '/bin',
  '/sbin',
  '/boot',
  '/dev',
  '/proc',
  '/sys',
  '/run',
  '/var/run',
  '/var/lock',
  '/System',
  '/private/etc',
  '/private/var/run',
];
/** /lib, /lib32, /lib64, /libx32 and the like. */
const libTree = /^\/lib[^/]*(?=\/|$)/;
const localTrees = ['/usr/local'];

/** Folders that hold other people's or programs' folders: a data dir may be under one, not one itself. */
const sharedFolders = new Set([
  '/',
  '/home',
  '/root',
  '/var',
  '/var/lib',
  '/var/tmp',
  '/tmp',
  '/opt',
  '/srv',
  '/mnt',
  '/media',
  '/usr/local',
  '/Users',
  '/Volumes',
  '/private',
  '/private/var',
  '/private/tmp',
]);

const within = (path: string, tree: string) => path === tree || path.startsWith(`${tree}/`);

/** The system folder an absolute, normalised path is or is under; undefined when none. */
export function systemTreeOf(path: string): string | undefined {
  if (localTrees.some((t) => within(path, t))) return undefined;
  return systemTrees.find((t) => within(path, t)) ?? libTree.exec(path)?.[0];
}

/** Whether an absolute, normalised path is a folder that holds others' (/, /home, /var/lib, ...). */
export function isSharedFolder(path: string): boolean {
  return sharedFolders.has(path);
}

/**
 * The path with the links in the part of it that exists followed (`/srv/data/x` where
 * /srv/data links to /etc is /etc/x): what llmgw would really write to.
 */
export function realPath(path: string): string {
  let existing = path;
  const rest: string[] = [];
  while (!existsSync(existing) && dirname(existing) !== existing) {
    rest.unshift(basename(existing));
    existing = dirname(existing);
  }
  try {
    return join(realpathSync(existing), ...rest);
  } catch {
    return path;
  }
}
