import type { Logger } from 'pino';

import { messageOf } from '../core/errors.js';
import type { NodeInventory } from '../gpu/types.js';
import type { EngineReport, EngineSettingsWire } from '../protocol/agent-protocol.js';

import {
  chooseFlavour,
  findInstalledLlama,
  installLlamaCpp,
  llamaEnv,
  type InstalledLlama,
  type LlamaInstallOptions,
} from './installer/index.js';
import { installUnavailable, llamaBin, type LlamaBin, type LlamaInstallState } from './llama-bin.js';
import { which } from './which.js';

export interface LlamaInstallsOptions {
  dataDir: string;
  logger: Logger;
  /** llama-server as this node's own settings name it: it wins over the control plane's, and nothing is installed. */
  localBin: string | undefined;
  /** The node's inventory as last read. */
  inventory: () => NodeInventory | undefined;
  install?: ((o: LlamaInstallOptions) => Promise<InstalledLlama>) | undefined;
  /** Looks for an earlier install without downloading (where a bin is configured). */
  findInstalled?: ((o: LlamaInstallOptions) => Promise<InstalledLlama | undefined>) | undefined;
  /** Where `llama-server` is looked for on PATH (default process.env). */
  env?: NodeJS.ProcessEnv | undefined;
  /** process.platform and process.arch, for tests. */
  platform?: string | undefined;
  arch?: string | undefined;
  /** The install moved on: report it. */
  onProgress: () => void;
  /** The install ended (done or failed): build the runs again. */
  onSettled: () => void;
}

/** The llama-server shards run: its path and environment, or why they wait. */
export interface LlamaChoice {
  bin?: string;
  env?: Record<string, string>;
  waiting?: string;
  /** Why its shards cannot start: no llama-server to run. */
  error?: string;
  /** Set when the build sees no GPU on a GPU node. */
  cpuOnly?: string;
}

interface Install {
  key: string;
  /** install: download unless installed; lookup: only find an earlier install (a bin is configured). */
  mode: 'install' | 'lookup';
  state: 'installing' | 'done' | 'failed';
  progress?: string;
  result?: InstalledLlama | undefined;
  error?: string;
  failedAt?: number;
  /** A try again after this failure: what ran meanwhile (PATH's) keeps running while it is under way. */
  retryOf?: string | undefined;
}

/**
 * The llama-server of the engines the agent installs itself (`Engine.installedByAgent`), in
 * llama-bin.ts's order: the build it installed and checked, else the configured one, else
 * llama.cpp's release archive for this node's GPUs, installed once per build and flavour and
 * tried again a minute after a failure, meanwhile `llama-server` from PATH if there is one.
 */
export class LlamaInstalls {
  readonly #o: LlamaInstallsOptions;
  #install: Install | undefined;
  #last: LlamaBin | undefined;

  constructor(options: LlamaInstallsOptions) {
    this.#o = options;
  }

  /**
   * The llama-server to run, and why; `needed`: a process shard of such an engine is
   * assigned (containers bring their own).
   */
  choose(engines: EngineSettingsWire, inventory: NodeInventory | undefined, needed: boolean): LlamaChoice {
    if (!needed) {
      this.#last = undefined;
      return {};
    }
    const arch = this.#o.arch ?? process.arch;
    const cards = inventory?.gpu.cards ?? [];
    const mig = cards.some((c) => c.mig?.current === true);
    const { flavour, warning } = chooseFlavour(cards.length > 0, mig, engines.llamacpp.cuda_archive, arch);
    const key = `${engines.llamacpp.build}-${flavour}`;
    const local = this.#o.localBin;
    const sent = engines.llamacpp.bin;
    const mode = local === undefined && sent === undefined ? 'install' : 'lookup';
    const unavailable = installUnavailable(this.#o.platform ?? process.platform, arch);
    const current = this.#install;
    if (
      unavailable === undefined &&
      (current?.key !== key ||
        current.mode !== mode ||
        (mode === 'install' && current.state === 'failed' && Date.now() - (current.failedAt ?? 0) > 60_000))
    ) {
      this.#startInstall({ key, mode, engines, flavour, arch });
    }
    const install = unavailable === undefined ? this.#install : undefined;
    const result = install?.state === 'done' ? install.result : undefined;
    const choice = llamaBin({
      key,
      installed: result,
      local,
      sent,
      install: installState(install, unavailable),
      onPath: which('llama-server', this.#o.env ?? process.env),
    });
    this.#last = choice;
    if (choice.source === 'waiting') return { waiting: choice.why };
    if (choice.source === 'none') return { error: choice.why };
    if (choice.source !== 'installed' || result === undefined) return { bin: choice.bin };
    const cpuOnly =
      cards.length > 0 && result.devices.length === 0
        ? `this node has GPUs but its llama.cpp build (${result.build}, ${result.flavour}) lists none, so llama.cpp runs on the CPU at about a tenth of the speed${warning === undefined ? '' : `; ${warning}`}: set agent.engines.llamacpp.cuda_archive to a CUDA build, or check the Vulkan driver`
        : undefined;
    return { bin: result.bin, env: llamaEnv(result.bin), ...(cpuOnly === undefined ? {} : { cpuOnly }) };
  }

  #startInstall(o: {
    key: string;
    mode: Install['mode'];
    engines: EngineSettingsWire;
    flavour: ReturnType<typeof chooseFlavour>['flavour'];
    arch: string;
  }): void {
    const { key, mode, engines, flavour } = o;
    const before = this.#install;
    const retryOf =
      before?.key === key && before.mode === mode && before.state === 'failed' ? before.error : undefined;
    const install: Install = { key, mode, state: 'installing', retryOf };
    this.#install = install;
    let lastLog = 0;
    const options: LlamaInstallOptions = {
      build: engines.llamacpp.build,
      releaseUrl: engines.llamacpp.release_url,
      flavour,
      cudaArchive: engines.llamacpp.cuda_archive,
      sha256: engines.llamacpp.sha256,
      arch: o.arch,
      dataDir: this.#o.dataDir,
      onProgress: (p) => {
        const pct =
          p.total === undefined || p.received === undefined
            ? undefined
            : Math.floor((p.received / p.total) * 100);
        install.progress =
          p.phase === 'download' ? `downloading${pct === undefined ? '' : ` ${pct}%`}` : p.phase;
        const now = Date.now();
        if (now - lastLog > 2000 || p.phase !== 'download') {
          lastLog = now;
          this.#o.logger.info(
            { phase: p.phase, received: p.received, total: p.total, message: p.message },
            `llama.cpp ${key}: ${install.progress}`,
          );
          this.#o.onProgress();
        }
      },
    };
    let run: Promise<InstalledLlama | undefined>;
    if (mode === 'lookup') {
      // A bin is configured: it opts out of the install, but a build installed here wins.
      run = (this.#o.findInstalled ?? findInstalledLlama)(options);
    } else {
      this.#o.logger.info({ build: engines.llamacpp.build, flavour }, 'installing llama.cpp');
      run = (this.#o.install ?? installLlamaCpp)(options);
    }
    run.then(
      (result) => {
        if (this.#install !== install) return;
        install.state = 'done';
        install.result = result;
        if (result !== undefined) this.#ready(result, mode);
        this.#o.onSettled();
      },
      (e: unknown) => {
        if (this.#install !== install) return;
        install.state = 'failed';
        install.failedAt = Date.now();
        install.error = messageOf(e);
        if (mode === 'lookup') {
          // Nothing installed to prefer: the configured bin runs.
          this.#o.logger.warn({ err: install.error }, 'could not look for an installed llama.cpp build');
          this.#o.onSettled();
          return;
        }
        this.#o.logger.error({ err: install.error }, 'llama.cpp install failed');
        this.#o.onSettled();
        // Tried again later: the mirror may come back, or the network be fixed.
        setTimeout(() => this.#o.onSettled(), 61_000).unref();
      },
    );
  }

  #ready(result: InstalledLlama, mode: Install['mode']): void {
    const cards = this.#o.inventory()?.gpu.cards ?? [];
    if (cards.length > 0 && result.devices.length === 0) {
      this.#o.logger.error(
        { build: result.build, flavour: result.flavour },
        'this node has GPUs but the llama.cpp build lists none: llama.cpp replicas here run on the CPU, about ten times slower',
      );
    } else {
      this.#o.logger.info(
        { bin: result.bin, version: result.version, devices: result.devices, reused: result.reused },
        mode === 'lookup'
          ? 'llama.cpp installed here, which wins over the configured bin'
          : 'llama.cpp ready',
      );
    }
  }

  /** Which llama-server runs and why, and the install's state, for the agent's report of its engines. */
  report(): EngineReport {
    const c = this.#last;
    const i = this.#install;
    if (c === undefined) return {};
    const cards = this.#o.inventory()?.gpu.cards ?? [];
    const r = i?.state === 'done' && c.source === 'installed' ? i.result : undefined;
    return {
      llamacpp: {
        source: c.source,
        why: c.why,
        ...('bin' in c ? { bin: c.bin } : {}),
        ...(r === undefined ? {} : { build: r.build, flavour: r.flavour, devices: r.devices }),
        ...(i?.state === 'installing' && i.mode === 'install'
          ? { installing: i.progress ?? 'starting' }
          : {}),
        ...(i?.state === 'failed' && i.mode === 'install'
          ? { warning: `install failed: ${i.error ?? ''}` }
          : {}),
        ...(r !== undefined && cards.length > 0 && r.devices.length === 0
          ? {
              warning:
                'this node has GPUs but its llama.cpp build lists none: llama.cpp runs on the CPU here',
            }
          : {}),
      },
    };
  }
}

/** What llama-bin.ts is told of the agent's own install. */
function installState(i: Install | undefined, unavailable: string | undefined): LlamaInstallState {
  if (unavailable !== undefined) return { state: 'unavailable', reason: unavailable };
  if (i === undefined) return { state: 'not_tried' };
  if (i.state === 'installing')
    return i.mode === 'lookup'
      ? { state: 'looking' }
      : { state: 'installing', progress: i.progress, retryOf: i.retryOf };
  if (i.state === 'failed' && i.mode === 'install')
    return { state: 'failed', error: `${i.error ?? 'unknown error'}; it is tried again in a minute` };
  // Done (its result, if any, is the installed build), or a look that failed: nothing installed.
  return { state: 'not_tried' };
}
