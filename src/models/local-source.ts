/**
 * A local path as a model source, checked to be a model before its files are listed. A file
 * must be a GGUF or a safetensors file (its header is read, never its weights); a folder must
 * hold a model (a config.json beside weights, or GGUF files), found by a walk bounded in depth
 * and entries. What is not a regular file or folder is never opened: devices, FIFOs, sockets,
 * and the kernel's files (/proc, /sys) are refused from stat. The control plane's own data (its
 * data dir, database, settings file) is never a source, nor a folder that holds it.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, opendir, realpath, stat, statfs } from 'node:fs/promises';
import { basename, join } from 'node:path';

import { LlmgwError, messageOf } from '../core/errors.js';
import type { Origin, OriginFile } from './origin.js';
import { checkWeightHeader, formatOfName, headerBytes } from './weight-header.js';

/** A file or folder of the control plane's own, and what it is in words: `the control plane's database`. */
export interface OwnPath {
  path: string;
  what: string;
}

/** How far a folder is walked to find its model: what a model's folder needs, and no more. */
export const localWalk = { depth: 4, entries: 2_000 } as const;

/** A model's config.json is a few kB; one larger is not read whole. */
const maxConfigBytes = 1024 * 1024;

/** The kernel's file systems (linux/magic.h): their files are not on a disk, and reading some has effects. */
const kernelFs: ReadonlyMap<number, string> = new Map([
  [0x9fa0, 'procfs (/proc)'],
  [0x62656572, 'sysfs (/sys)'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x27e0eb, 'cgroupfs'],
  [0x63677270, 'cgroup2'],
  [0x1cd1, 'devpts'],
  [0xcafe4a11, 'bpffs'],
  [0xde5e81e4, 'efivarfs'],
  [0x6165676c, 'pstore'],
  [0x62656570, 'configfs'],
  [0x65735543, 'fusectl'],
]);

const serveWhat =
  'a local source is a model: a GGUF file, a safetensors file, or a folder with a config.json and weights';

const refuse = (message: string): never => {
  throw new LlmgwError('invalid_argument', message);
};

const inside = (child: string, parent: string): boolean =>
  child === parent || child.startsWith(parent.endsWith('/') ? parent : `${parent}/`);

/** Each own path as written and as the file system resolves it (a data dir reached through a link). */
async function ownForms(own: readonly OwnPath[]): Promise<OwnPath[]> {
  const out: OwnPath[] = [];
  for (const o of own) {
    out.push(o);
    const real = await realpath(o.path).catch(() => undefined);
    if (real !== undefined && real !== o.path) out.push({ ...o, path: real });
  }
  return out;
}

/** Refuses a path that is, or is inside, the control plane's own data; with `holds`, one that holds it too. */
function refuseOwn(shown: string, path: string, own: readonly OwnPath[], holds: boolean): void {
  for (const o of own) {
    if (inside(path, o.path)) {
      refuse(
        `${shown} is ${path === o.path ? '' : 'inside '}${o.what}: llmgw never serves its own data; point source at a model's file or folder`,
      );
    }
    if (holds && inside(o.path, path)) {
      refuse(
        `${shown} holds ${o.what} (${o.path}): point source at the model's own folder, not one that holds llmgw's data`,
      );
    }
  }
}

function kindOf(st: Stats): string {
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  return 'neither a regular file nor a folder';
}

async function refuseKernelFs(shown: string, path: string): Promise<void> {
  const fs = await statfs(path).catch(() => undefined);
  const name = fs === undefined ? undefined : kernelFs.get(fs.type);
  if (name !== undefined) {
    refuse(`${shown} is on ${name}, the kernel's own files, not a model file on a disk: ${serveWhat}`);
  }
}

function unreadable(shown: string, e: unknown): never {
  const code = (e as { code?: string }).code;
  if (code === 'EACCES' || code === 'EPERM') {
    return refuse(
      `llmgw cannot read ${shown} (permission denied): the control plane checks that a local source is a model before it takes it; make it readable by the user llmgw runs as`,
    );
  }
  throw new LlmgwError('unavailable', `${shown} could not be read: ${messageOf(e)}`, { cause: e });
}

/**
 * The first bytes of a regular file. Opened without blocking, and checked again once open, so
 * a file swapped for a FIFO after its stat is not waited on.
 */
async function readHead(path: string, shown: string, max: number): Promise<{ head: Buffer; size: number }> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    return unreadable(shown, e);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return refuse(`${shown} is ${kindOf(st)}: ${serveWhat}`);
    const head = Buffer.alloc(Math.min(max, st.size));
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    return { head: head.subarray(0, bytesRead), size: st.size };
  } catch (e) {
    if (e instanceof LlmgwError) throw e;
    return unreadable(shown, e);
  } finally {
    await handle.close();
  }
}

/** Refuses a file that is not the GGUF or safetensors file its name (or its first bytes) say. */
async function checkWeightFile(path: string, shown: string): Promise<void> {
  const { head, size } = await readHead(path, shown, headerBytes);
  const check = checkWeightHeader(head, size, formatOfName(path));
  if (!check.ok) refuse(`${shown} ${check.why}: ${serveWhat}`);
}

async function checkConfig(path: string, shown: string): Promise<void> {
  const { head, size } = await readHead(path, shown, maxConfigBytes);
  if (size > maxConfigBytes)
    refuse(`${shown} is ${size} bytes, and a model's config.json is a few kB: ${serveWhat}`);
  let json: unknown;
  try {
    json = JSON.parse(head.toString('utf8'));
  } catch {
    return refuse(`${shown} is not JSON: ${serveWhat}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    refuse(`${shown} is not a JSON object: ${serveWhat}`);
}

/**
 * What a folder's entry is, a link followed to what it names: undefined for what is gone or
 * names nothing. A link to the control plane's own data or to the kernel's files is refused.
 */
async function entryStat(path: string, shown: string, own: readonly OwnPath[]): Promise<Stats | undefined> {
  try {
    const l = await lstat(path);
    if (!l.isSymbolicLink()) return l;
    const real = await realpath(path);
    refuseOwn(shown, real, own, true);
    await refuseKernelFs(shown, real);
    return await stat(real);
  } catch (e) {
    if (e instanceof LlmgwError) throw e;
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return undefined;
    return unreadable(shown, e);
  }
}

interface Walked {
  files: OriginFile[];
  entries: number;
}

/**
 * The regular files under `root`, at most `localWalk.entries` entries and `localWalk.depth`
 * folders deep (deeper ones are not looked at); hidden entries (.git, .cache) are not the model.
 * A link is followed to what it names, and refused when that is the control plane's own data or
 * the kernel's files; devices, FIFOs and sockets are left out unopened.
 */
async function walk(root: string, shown: string, own: readonly OwnPath[]): Promise<Walked> {
  const out: Walked = { files: [], entries: 0 };
  const visit = async (dir: string, rel: string, depth: number): Promise<void> => {
    const here = rel === '' ? shown : join(shown, rel);
    // A folder may be where the kernel's files are mounted (a chroot's /proc): its files are not read.
    await refuseKernelFs(here, dir);
    let handle;
    try {
      handle = await opendir(dir);
    } catch (e) {
      return unreadable(here, e);
    }
    // The listing is read as it is walked: a folder of a million entries is not listed whole.
    for await (const e of handle) {
      if (e.name.startsWith('.')) continue;
      out.entries++;
      if (out.entries > localWalk.entries) {
        refuse(
          `${shown} holds more than ${localWalk.entries} files and folders: llmgw looks at no more than ${localWalk.entries}, ${localWalk.depth} folders deep, for a model; point source at the model's own folder (the one with its config.json and weights, or its .gguf files), or at its file`,
        );
      }
      const path = join(dir, e.name);
      const relPath = rel === '' ? e.name : `${rel}/${e.name}`;
      const st = await entryStat(path, join(shown, relPath), own);
      if (st === undefined) continue;
      if (st.isDirectory()) {
        if (depth < localWalk.depth) await visit(path, relPath, depth + 1);
      } else if (st.isFile()) {
        out.files.push({ path: relPath, size: st.size });
      }
    }
  };
  await visit(root, '', 1);
  return out;
}

const isMmproj = (p: string) => basename(p).toLowerCase().includes('mmproj');

/** Refuses a folder that holds no model; checks the headers of the weights it does hold. */
async function checkFolder(root: string, shown: string, files: readonly OriginFile[]): Promise<void> {
  const ggufs = files.filter((f) => formatOfName(f.path) === 'gguf');
  const config = files.find((f) => f.path === 'config.json');
  const rootWeights = files.filter((f) => !f.path.includes('/') && /\.(safetensors|bin)$/i.test(f.path));
  const isModel = ggufs.some((f) => !isMmproj(f.path)) || (config !== undefined && rootWeights.length > 0);
  if (!isModel) {
    refuse(
      `${shown} holds no model: llmgw looks for a config.json with weights beside it (*.safetensors or *.bin) or for .gguf files, ${localWalk.depth} folders deep at most; point source at the model's own folder, or at its file`,
    );
  }
  const at = (f: OriginFile) => join(root, ...f.path.split('/'));
  for (const f of files) {
    if (formatOfName(f.path) !== undefined) await checkWeightFile(at(f), join(shown, f.path));
  }
  if (config !== undefined) await checkConfig(at(config), join(shown, 'config.json'));
}

/**
 * The origin of a local source: its files and sizes, once it is known to be a model. A path
 * this machine does not have is `not_found` (it may be on the nodes only); a path that is not a
 * model, or is llmgw's own data, is refused (`invalid_argument`) in words that say what to write.
 */
export async function resolveLocalSource(path: string, ownPaths: readonly OwnPath[] = []): Promise<Origin> {
  const own = await ownForms(ownPaths);
  refuseOwn(path, path, own, true);
  let st: Stats;
  let real: string;
  try {
    st = await stat(path);
    real = await realpath(path);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new LlmgwError('not_found', `there is no file or directory at ${path}: check the path`);
    }
    return unreadable(path, e);
  }
  if (real !== path) refuseOwn(path, real, own, st.isDirectory());
  await refuseKernelFs(path, real);
  let files: OriginFile[];
  if (st.isDirectory()) {
    files = (await walk(path, path, own)).files;
    files.sort((a, b) => a.path.localeCompare(b.path));
    await checkFolder(path, path, files);
  } else if (st.isFile()) {
    await checkWeightFile(path, path);
    files = [{ path: basename(path), size: st.size }];
  } else {
    return refuse(`${path} is ${kindOf(st)}: ${serveWhat}`);
  }
  return { source: path, kind: 'path', revision: '', files };
}
