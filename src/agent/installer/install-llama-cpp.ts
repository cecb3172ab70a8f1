import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

import { defaultReleaseUrl } from '../../config/schema.js';
import { LlmgwError, isLlmgwError, messageOf } from '../../core/errors.js';
import { redactUrl } from '../../core/redact.js';
import { isExecutable } from '../which.js';

import { download, exists, publishedSha256, type FetchOptions, type Source } from './download.js';
import { acquireLock } from './install-lock.js';
import {
  assetName,
  checkBuild,
  llamaFlavours,
  setting,
  zipAssetName,
  type LlamaFlavour,
} from './llama-asset.js';
import { checkLlama, listDevices } from './llama-check.js';
import { MARKER, readMarker, type Marker } from './marker.js';
import { archiveKind, findFile, unpackTarball } from './unpack.js';

export interface LlamaInstallProgress {
  phase: 'download' | 'verify' | 'unpack' | 'check';
  received?: number;
  total?: number;
  message?: string;
}

export interface LlamaInstallOptions {
  /** The release tag, `b10587`. */
  build: string;
  /** Where release assets live (an offline site names its mirror); an asset is `${releaseUrl}/${build}/${assetName}`. */
  releaseUrl?: string | undefined;
  flavour: LlamaFlavour;
  /** For flavour 'cuda': the URL of the CUDA build archive (.tar.gz) the operator configured. */
  cudaArchive?: string | undefined;
  /** A SHA-256 the operator pins: wins over the one published beside the file. */
  sha256?: string | undefined;
  /** process.arch: 'x64' or 'arm64' (Vulkan is x64 only). */
  arch: string;
  /** Installs into `${dataDir}/engines/llamacpp/${build}-${flavour}/`. */
  dataDir: string;
  onProgress?: ((p: LlamaInstallProgress) => void) | undefined;
  fetch?: typeof fetch | undefined;
  /** How long the download may stall, and each check of the binary may run (default 60 s). */
  timeoutMs?: number | undefined;
  /** The environment the checks run the binary in (default: engineEnv of process.env, as engines get). */
  env?: NodeJS.ProcessEnv | undefined;
  signal?: AbortSignal | undefined;
}

export interface InstalledLlama {
  /** The llama-server to run; launch it with llamaEnv(bin) merged into its environment. */
  bin: string;
  build: string;
  flavour: LlamaFlavour;
  /** `b10587-3f545becc`, as the binary reported it. */
  version: string;
  /** What `--list-devices` printed: empty for the CPU build, or a GPU build whose backend did not load. */
  devices: string[];
  checksum: 'verified' | 'not published';
  /** Found installed and checked already, not downloaded now. */
  reused: boolean;
}

interface Plan {
  options: LlamaInstallOptions;
  name: string;
  dir: string;
  base: string;
  source: Source;
  /** The old .zip asset of the same build, for telling "too old" from "no such build". */
  zipUrl: string | undefined;
  fetchOptions: FetchOptions;
  timeoutMs: number;
  emit: (p: LlamaInstallProgress) => void;
}

interface InFlight {
  promise: Promise<InstalledLlama>;
  listeners: Set<(p: LlamaInstallProgress) => void>;
}

/** Installs under way in this process, by target directory: a second caller joins the first. */
const inFlight = new Map<string, InFlight>();

/**
 * Installs a llama.cpp release (or the operator's CUDA build) under the data dir and checks
 * that it runs here; reuses an earlier install of the same build and flavour. Concurrent
 * calls for one build share one install (the first caller's options win; every caller
 * gets progress); other processes on the same data dir wait on a lock file.
 */
export async function installLlamaCpp(options: LlamaInstallOptions): Promise<InstalledLlama> {
  // async, so that a refused option rejects rather than throws; the map is still filled
  // before the first await, which is what makes a second call find the first.
  const plan = planOf(options);
  const running = inFlight.get(plan.dir);
  if (running !== undefined) {
    if (options.onProgress !== undefined) running.listeners.add(options.onProgress);
    return running.promise;
  }
  const listeners = new Set<(p: LlamaInstallProgress) => void>();
  if (options.onProgress !== undefined) listeners.add(options.onProgress);
  plan.emit = (p) => {
    for (const l of listeners) {
      try {
        l(p);
      } catch {
        // A progress display that throws must not fail the install.
      }
    }
  };
  const promise = install(plan).finally(() => inFlight.delete(plan.dir));
  inFlight.set(plan.dir, { promise, listeners });
  return promise;
}

/**
 * A build installed and checked earlier, found as installLlamaCpp would reuse it (and run
 * again to list its devices); undefined if there is none. Downloads nothing: it is how a
 * node whose settings name a llama-server learns that an installed build wins over it.
 */
export async function findInstalledLlama(options: LlamaInstallOptions): Promise<InstalledLlama | undefined> {
  return reuse(planOf(options));
}

function planOf(options: LlamaInstallOptions): Plan {
  checkBuild(options.build);
  if (!llamaFlavours.includes(options.flavour)) {
    throw new LlmgwError(
      'invalid_argument',
      `"${options.flavour}" is not a llama.cpp flavour: use one of ${llamaFlavours.join(', ')}`,
    );
  }
  if (options.sha256 !== undefined && !/^[0-9a-fA-F]{64}$/.test(options.sha256)) {
    throw new LlmgwError(
      'invalid_argument',
      `the pinned sha256 "${options.sha256}" is not a SHA-256 digest: give the 64 hex digits sha256sum prints`,
    );
  }
  const name = `${options.build}-${options.flavour}`;
  const dir = resolve(options.dataDir, 'engines', 'llamacpp', name);
  const timeoutMs = options.timeoutMs ?? 60_000;
  let source: Source;
  let zipUrl: string | undefined;
  if (options.flavour === 'cuda') {
    source = {
      url: cudaUrl(options.cudaArchive),
      notFound: `no such archive: check ${setting.cudaArchive}`,
      unreachable: `set ${setting.cudaArchive} to an address this node reaches, or ${setting.bin} to an installed llama-server`,
    };
  } else {
    const release = (options.releaseUrl ?? defaultReleaseUrl).replace(/\/+$/, '');
    source = {
      url: `${release}/${options.build}/${assetName(options.build, options.flavour, options.arch)}`,
      notFound: `no such asset: check ${setting.build} (e.g. b10587) or the release address ${setting.releaseUrl}`,
      unreachable: `set ${setting.releaseUrl} to a mirror this node reaches, or ${setting.bin} to an installed llama-server`,
    };
    zipUrl = `${release}/${options.build}/${zipAssetName(options.build, options.flavour, options.arch)}`;
  }
  return {
    options,
    name,
    dir,
    base: dirname(dir),
    source,
    zipUrl,
    fetchOptions: { fetch: options.fetch ?? fetch, stallMs: timeoutMs, signal: options.signal },
    timeoutMs,
    emit: () => undefined,
  };
}

function cudaUrl(archive: string | undefined): string {
  if (archive === undefined || archive.trim() === '') {
    throw new LlmgwError(
      'invalid_argument',
      `llama.cpp publishes no Linux CUDA build: set ${setting.cudaArchive} to the URL of a CUDA build archive (.tar.gz holding llama-server and its libraries), or install the Vulkan build`,
    );
  }
  let url: URL;
  try {
    url = new URL(archive.trim());
  } catch {
    throw new LlmgwError(
      'invalid_argument',
      `${setting.cudaArchive} is "${redactUrl(archive)}", which is not a URL: give the http(s) address of a .tar.gz`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new LlmgwError(
      'invalid_argument',
      `${setting.cudaArchive} is ${redactUrl(archive)}: give an http(s) address of a .tar.gz (serve a local file with any web server)`,
    );
  }
  if (url.pathname.toLowerCase().endsWith('.zip')) {
    throw new LlmgwError(
      'invalid_argument',
      `${setting.cudaArchive} is ${redactUrl(archive)}, a .zip: llmgw unpacks .tar.gz archives only, so pack the build as one (tar czf)`,
    );
  }
  return url.toString();
}

async function install(plan: Plan): Promise<InstalledLlama> {
  await mkdir(plan.base, { recursive: true });
  const found = await reuse(plan);
  if (found !== undefined) return found;
  const lock = await acquireLock(join(plan.base, `.${plan.name}.lock`), {
    signal: plan.options.signal,
    onWait: (holder) => {
      plan.emit({
        phase: 'download',
        message: `waiting for ${holder === undefined ? 'another process' : `process ${holder.pid} on ${holder.host}`} installing llama.cpp ${plan.name}`,
      });
    },
  });
  try {
    // Whoever held the lock may have installed it meanwhile.
    const again = await reuse(plan);
    if (again !== undefined) return again;
    await removeLeftovers(plan);
    return await fresh(plan);
  } finally {
    await lock.release();
  }
}

/** An earlier install of this build, if its marker matches and it still lists its devices. */
async function reuse(plan: Plan): Promise<InstalledLlama | undefined> {
  const marker = await readMarker(plan.dir);
  const bin = join(plan.dir, 'llama-server');
  if (marker === undefined || !matches(marker, plan) || !isExecutable(bin)) return undefined;
  try {
    const devices = await listDevices(bin, {
      env: plan.options.env,
      timeoutMs: plan.timeoutMs,
      signal: plan.options.signal,
    });
    plan.emit({
      phase: 'check',
      message: `using llama.cpp ${marker.version} installed at ${plan.dir} on ${marker.installed_at}`,
    });
    return {
      bin,
      build: marker.build,
      flavour: marker.flavour,
      version: marker.version,
      devices,
      checksum: marker.checksum,
      reused: true,
    };
  } catch (e) {
    if (plan.options.signal?.aborted === true) throw e;
    // Damaged, or this machine changed: a fresh copy either runs or says why it does not.
    plan.emit({
      phase: 'check',
      message: `the installed llama.cpp ${plan.name} no longer runs (${messageOf(e)}); installing it again`,
    });
    return undefined;
  }
}

function matches(marker: Marker, plan: Plan): boolean {
  if (marker.build !== plan.options.build || marker.flavour !== plan.options.flavour) return false;
  // A release asset is the same bytes from any mirror; an operator's CUDA archive at a new
  // address is a new build, whatever tag it carries.
  if (plan.options.flavour === 'cuda' && marker.source !== redactUrl(plan.source.url)) return false;
  const pinned = plan.options.sha256?.toLowerCase();
  return pinned === undefined || marker.sha256 === pinned;
}

async function fresh(plan: Plan): Promise<InstalledLlama> {
  const { options, source } = plan;
  const tag = `${plan.name}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const file = join(plan.base, `.download-${tag}`);
  const tmp = join(plan.base, `.unpack-${tag}`);
  try {
    plan.emit({ phase: 'download', message: `downloading ${redactUrl(source.url)}` });
    const got = await download(source, file, {
      ...plan.fetchOptions,
      onProgress: (received, total) => {
        plan.emit(
          total === undefined ? { phase: 'download', received } : { phase: 'download', received, total },
        );
      },
    }).catch(async (e: unknown) => {
      throw await explainNotFound(e, plan);
    });

    const checksum = await verify(plan, got.sha256);

    plan.emit({ phase: 'unpack', message: `unpacking ${basename(new URL(source.url).pathname)}` });
    const kind = await archiveKind(file);
    if (kind === 'zip') throw zipRefused(plan, `${redactUrl(source.url)} is a .zip archive`);
    if (kind === 'unknown') {
      throw new LlmgwError(
        'invalid_argument',
        `${redactUrl(source.url)} is not a .tar.gz archive; nothing was installed: ${source.notFound}`,
      );
    }
    await mkdir(tmp);
    await unpackTarball(file, tmp).catch((e: unknown) => {
      throw new LlmgwError(
        'invalid_argument',
        `${redactUrl(source.url)} does not unpack (${messageOf(e)}); nothing was installed: try again, or ${source.unreachable}`,
        { cause: e },
      );
    });
    const server = await findFile(tmp, 'llama-server');
    if (server === undefined) {
      const top = (await readdir(tmp)).slice(0, 5).join(', ');
      throw new LlmgwError(
        'invalid_argument',
        `${redactUrl(source.url)} holds no llama-server (it has ${top === '' ? 'nothing' : top}); nothing was installed: ${options.flavour === 'cuda' ? `point ${setting.cudaArchive} at an archive of a llama.cpp build that includes llama-server` : source.notFound}`,
      );
    }
    await chmod(server, 0o755);

    plan.emit({ phase: 'check', message: `checking that ${plan.name} runs here` });
    // Checked where it was unpacked: only a build that runs is moved into place.
    const checked = await checkLlama(server, {
      env: options.env,
      timeoutMs: plan.timeoutMs,
      signal: options.signal,
    });
    if (checked.build !== undefined && `b${checked.build}` !== options.build) {
      plan.emit({
        phase: 'check',
        message: `${redactUrl(source.url)} reports build ${checked.build}, not ${options.build}; installing it as ${options.build}`,
      });
    }
    const marker: Marker = {
      build: options.build,
      flavour: options.flavour,
      version: checked.version,
      checksum,
      sha256: got.sha256,
      // Redacted: the data dir is no place for a mirror's password.
      source: redactUrl(source.url),
      installed_at: new Date().toISOString(),
    };
    // The binary's directory holds the shared libraries it links; it moves as a whole.
    const binDir = dirname(server);
    await writeFile(join(binDir, MARKER), `${JSON.stringify(marker, null, 2)}\n`);
    await replaceDir(binDir, plan);
    const bin = join(plan.dir, 'llama-server');
    return {
      bin,
      build: options.build,
      flavour: options.flavour,
      version: checked.version,
      devices: checked.devices,
      checksum,
      reused: false,
    };
  } finally {
    await rm(file, { force: true });
    await rm(tmp, { recursive: true, force: true });
  }
}

async function verify(plan: Plan, actual: string): Promise<InstalledLlama['checksum']> {
  const url = redactUrl(plan.source.url);
  const pinned = plan.options.sha256?.toLowerCase();
  if (pinned !== undefined) {
    plan.emit({ phase: 'verify', message: `checking the SHA-256 pinned for ${url}` });
    if (actual !== pinned) {
      throw new LlmgwError(
        'precondition_failed',
        `the download of ${url} does not match the SHA-256 pinned for it: expected ${pinned}, got ${actual}; nothing was installed: pin the digest of this file, or point at the file the pin is for`,
      );
    }
    return 'verified';
  }
  const published = await publishedSha256(plan.source, plan.fetchOptions);
  if (published === undefined) {
    plan.emit({
      phase: 'verify',
      message: `no SHA-256 is published at ${url}.sha256: installing it unverified (pin one with the sha256 option)`,
    });
    return 'not published';
  }
  plan.emit({ phase: 'verify', message: `checking the SHA-256 published at ${url}.sha256` });
  if (actual !== published) {
    throw new LlmgwError(
      'precondition_failed',
      `the download of ${url} does not match its published SHA-256: expected ${published}, got ${actual}; nothing was installed: try again, and if it persists the mirror holds a different file`,
    );
  }
  return 'verified';
}

/** A 404 for a build old enough to have shipped .zip archives for Linux says so. */
async function explainNotFound(e: unknown, plan: Plan): Promise<unknown> {
  if (!isLlmgwError(e) || e.code !== 'not_found' || plan.zipUrl === undefined) return e;
  if (!(await exists(plan.zipUrl, plan.fetchOptions))) return e;
  return zipRefused(plan, `the release has ${basename(plan.zipUrl)} and no .tar.gz`);
}

function zipRefused(plan: Plan, what: string): LlmgwError {
  if (plan.options.flavour === 'cuda') {
    return new LlmgwError(
      'invalid_argument',
      `${what}: llmgw unpacks .tar.gz archives only; nothing was installed: pack the build as one (tar czf) and set ${setting.cudaArchive} to it`,
    );
  }
  return new LlmgwError(
    'invalid_argument',
    `${what}: llama.cpp ${plan.options.build} predates its .tar.gz archives for Linux, and llmgw unpacks .tar.gz only; nothing was installed: set ${setting.build} to a newer build (e.g. b10587), or ${setting.bin} to an installed llama-server`,
  );
}

/**
 * Moves the checked build into place with a rename, so the directory is either the old
 * one or the new one. An old one is there only when it no longer ran (or was never ours);
 * it is set aside first because rename does not replace a non-empty directory.
 */
async function replaceDir(from: string, plan: Plan): Promise<void> {
  try {
    await rename(from, plan.dir);
    return;
  } catch (e) {
    if (!['ENOTEMPTY', 'EEXIST', 'ENOTDIR', 'EISDIR'].includes(errno(e) ?? '')) throw e;
  }
  const aside = join(plan.base, `.replaced-${plan.name}-${randomBytes(4).toString('hex')}`);
  await rename(plan.dir, aside);
  try {
    await rename(from, plan.dir);
  } catch (e) {
    await rename(aside, plan.dir).catch(() => undefined);
    throw e;
  }
  await rm(aside, { recursive: true, force: true });
}

/** What a process killed mid-install left behind; holding the lock, nobody else is using it. */
async function removeLeftovers(plan: Plan): Promise<void> {
  const prefixes = [`.download-${plan.name}-`, `.unpack-${plan.name}-`, `.replaced-${plan.name}-`];
  for (const entry of await readdir(plan.base)) {
    if (prefixes.some((p) => entry.startsWith(p)))
      await rm(join(plan.base, entry), { recursive: true, force: true });
  }
}

function errno(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string'
    ? e.code
    : undefined;
}
