import type { Logger } from 'pino';

import { messageOf } from '../core/errors.js';
import type { NodeInventory } from '../gpu/types.js';
import type { EngineReport, EngineSettingsWire } from '../protocol/agent-protocol.js';

import {
  chooseFlavour,
  installLlamaCpp,
  llamaEnv,
  type InstalledLlama,
  type LlamaInstallOptions,
} from './installer/index.js';

export interface LlamaInstallsOptions {
  dataDir: string;
  logger: Logger;
  /** llama-server as this node's own settings name it: it wins over the control plane's, and nothing is installed. */
  localBin: string | undefined;
  /** The node's inventory as last read. */
  inventory: () => NodeInventory | undefined;
  install?: ((o: LlamaInstallOptions) => Promise<InstalledLlama>) | undefined;
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
  /** Why its shards cannot start (an install that failed). */
  error?: string;
  /** Set when the build sees no GPU on a GPU node. */
  cpuOnly?: string;
}

interface Install {
  key: string;
  state: 'installing' | 'done' | 'failed';
  progress?: string;
  result?: InstalledLlama;
  error?: string;
  failedAt?: number;
}

/**
 * The llama-server of the engines the agent installs itself (`Engine.installedByAgent`):
 * the configured one, or llama.cpp's release archive for this node's GPUs, installed once
 * per build and flavour and tried again a minute after a failure.
 */
export class LlamaInstalls {
  readonly #o: LlamaInstallsOptions;
  #install: Install | undefined;

  constructor(options: LlamaInstallsOptions) {
    this.#o = options;
  }

  /**
   * The llama-server to run: this node's, the control plane's, or the one installed here;
   * `needed`: a process shard of such an engine is assigned (containers bring their own).
   */
  choose(engines: EngineSettingsWire, inventory: NodeInventory | undefined, needed: boolean): LlamaChoice {
    const local = this.#o.localBin ?? engines.llamacpp.bin;
    if (local !== undefined) return { bin: local };
    if (!needed) return {};
    const cards = inventory?.gpu.cards ?? [];
    const mig = cards.some((c) => c.mig?.current === true);
    const { flavour, warning } = chooseFlavour(
      cards.length > 0,
      mig,
      engines.llamacpp.cuda_archive,
      process.arch,
    );
    const key = `${engines.llamacpp.build}-${flavour}`;
    if (
      this.#install?.key !== key ||
      (this.#install.state === 'failed' && Date.now() - (this.#install.failedAt ?? 0) > 60_000)
    ) {
      this.#startInstall(key, engines, flavour);
    }
    const install = this.#install;
    if (install === undefined || install.state === 'installing')
      return {
        waiting: `installing llama.cpp ${key}${install?.progress === undefined ? '' : ` (${install.progress})`}`,
      };
    if (install.state === 'failed' || install.result === undefined) {
      return {
        error: `could not install llama.cpp ${key} (tried again in a minute): ${install.error ?? 'unknown error'}`,
      };
    }
    const result = install.result;
    const cpuOnly =
      cards.length > 0 && result.devices.length === 0
        ? `this node has GPUs but its llama.cpp build (${result.build}, ${result.flavour}) lists none, so llama.cpp runs on the CPU at about a tenth of the speed${warning === undefined ? '' : `; ${warning}`}: set agent.engines.llamacpp.cuda_archive to a CUDA build, or check the Vulkan driver`
        : undefined;
    return { bin: result.bin, env: llamaEnv(result.bin), ...(cpuOnly === undefined ? {} : { cpuOnly }) };
  }

  #startInstall(
    key: string,
    engines: EngineSettingsWire,
    flavour: ReturnType<typeof chooseFlavour>['flavour'],
  ): void {
    const install: Install = { key, state: 'installing' };
    this.#install = install;
    let lastLog = 0;
    const run = this.#o.install ?? installLlamaCpp;
    this.#o.logger.info({ build: engines.llamacpp.build, flavour }, 'installing llama.cpp');
    run({
      build: engines.llamacpp.build,
      releaseUrl: engines.llamacpp.release_url,
      flavour,
      cudaArchive: engines.llamacpp.cuda_archive,
      sha256: engines.llamacpp.sha256,
      arch: process.arch,
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
    }).then(
      (result) => {
        if (this.#install !== install) return;
        install.state = 'done';
        install.result = result;
        const cards = this.#o.inventory()?.gpu.cards ?? [];
        if (cards.length > 0 && result.devices.length === 0) {
          this.#o.logger.error(
            { build: result.build, flavour: result.flavour },
            'this node has GPUs but the llama.cpp build lists none: llama.cpp replicas here run on the CPU, about ten times slower',
          );
        } else {
          this.#o.logger.info(
            { bin: result.bin, version: result.version, devices: result.devices, reused: result.reused },
            'llama.cpp ready',
          );
        }
        this.#o.onSettled();
      },
      (e: unknown) => {
        if (this.#install !== install) return;
        install.state = 'failed';
        install.failedAt = Date.now();
        install.error = messageOf(e);
        this.#o.logger.error({ err: install.error }, 'llama.cpp install failed');
        this.#o.onSettled();
        // Tried again later: the mirror may come back, or the network be fixed.
        setTimeout(() => this.#o.onSettled(), 61_000).unref();
      },
    );
  }

  /** The install's state, for the agent's report of its engines. */
  report(): EngineReport {
    const i = this.#install;
    if (i === undefined) return {};
    const cards = this.#o.inventory()?.gpu.cards ?? [];
    const r = i.result;
    return {
      llamacpp: {
        ...(r === undefined ? {} : { bin: r.bin, build: r.build, flavour: r.flavour, devices: r.devices }),
        ...(i.state === 'installing' ? { installing: i.progress ?? 'starting' } : {}),
        ...(i.state === 'failed' ? { warning: `install failed: ${i.error ?? ''}` } : {}),
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
