import { setting } from './installer/llama-asset.js';

/**
 * Which llama-server a node runs, and why: one decision for the agent's runs and for
 * `llmgw doctor`. The order: a build the agent installed and checked (the only one seen to
 * run here, so it wins even over a configured bin); else the configured bin (this node's
 * setting, then the control plane's; setting it opts out of the install); else, once the
 * agent's own install could not be done, `llama-server` from PATH; else nothing, and the
 * shard is refused with what to set.
 */

/** Where the llama-server that runs comes from. */
export type LlamaBinSource = 'installed' | 'configured' | 'path';

/** A build the agent installed and checked, under its data dir. */
export interface InstalledRef {
  bin: string;
  build: string;
  flavour: string;
}

/** The agent's own install of the pinned build, as far as it went. */
export type LlamaInstallState =
  /** Not tried: the doctor, which only looks; the agent tries once a llama.cpp replica is placed. */
  | { state: 'not_tried' }
  /** A bin is configured: only an earlier install is looked for, nothing is downloaded. */
  | { state: 'looking' }
  /** `retryOf`: the error of the try before this one (PATH's llama-server keeps running meanwhile). */
  | { state: 'installing'; progress?: string | undefined; retryOf?: string | undefined }
  | { state: 'failed'; error: string }
  /** Nothing the agent installs runs on this platform. */
  | { state: 'unavailable'; reason: string };

export interface LlamaBinInput {
  /** `b6000-cpu`: the build and flavour the agent installs here. */
  key: string;
  installed: InstalledRef | undefined;
  /** agent.engines.llamacpp.bin in this node's own settings. */
  local: string | undefined;
  /** agent.engines.llamacpp.bin as the control plane sent it. */
  sent: string | undefined;
  install: LlamaInstallState;
  /** `llama-server` as PATH resolves it (which.ts), or undefined. */
  onPath: string | undefined;
}

export type LlamaBin =
  | { source: LlamaBinSource; bin: string; why: string }
  /** Shards wait: an install or a look for one is under way (or, for the doctor, not tried yet). */
  | { source: 'waiting'; why: string }
  /** Shards are refused with `why`. */
  | { source: 'none'; why: string };

export function llamaBin(i: LlamaBinInput): LlamaBin {
  const configured = configuredOf(i);
  if (i.installed !== undefined) {
    const over = configured === undefined ? '' : `, which wins over the configured bin ${configured.text}`;
    return {
      source: 'installed',
      bin: i.installed.bin,
      why: `installed build ${i.installed.build} (${i.installed.flavour}) at ${i.installed.bin}${over}`,
    };
  }
  if (i.install.state === 'looking')
    return {
      source: 'waiting',
      why: `looking for a llama.cpp ${i.key} the agent installed before running the configured ${configured?.bin ?? 'bin'}`,
    };
  if (configured !== undefined) {
    const shadowed =
      i.local !== undefined && i.sent !== undefined && i.sent !== i.local
        ? `; it wins over the control plane's ${i.sent}`
        : '';
    return {
      source: 'configured',
      bin: configured.bin,
      why: `configured: ${configured.text}${shadowed}; the agent installs nothing`,
    };
  }
  const fallback =
    i.onPath === undefined
      ? '; PATH has no llama-server to fall back on'
      : `; should that fail, it runs ${i.onPath} from PATH`;
  switch (i.install.state) {
    case 'not_tried':
      return {
        source: 'waiting',
        why: `not installed yet: the agent installs llama.cpp ${i.key} when a llama.cpp replica is placed here${fallback}`,
      };
    case 'installing':
      // Tried again after a failure: what PATH has keeps serving until the install succeeds.
      if (i.install.retryOf !== undefined && i.onPath !== undefined)
        return {
          source: 'path',
          bin: i.onPath,
          why: `from PATH: ${i.onPath} (nothing installed or configured; the agent's install of llama.cpp ${i.key} failed (${i.install.retryOf}) and is being tried again)`,
        };
      return {
        source: 'waiting',
        why: `installing llama.cpp ${i.key}${i.install.progress === undefined ? '' : ` (${i.install.progress})`}`,
      };
  }
  const failed =
    i.install.state === 'failed'
      ? `the agent's install of llama.cpp ${i.key} failed (${i.install.error})`
      : `the agent cannot install llama.cpp here (${i.install.reason})`;
  if (i.onPath !== undefined)
    return {
      source: 'path',
      bin: i.onPath,
      why: `from PATH: ${i.onPath} (nothing installed or configured; ${failed})`,
    };
  return {
    source: 'none',
    why: `no llama-server to run: ${failed}, none is configured and PATH has none: set ${setting.bin} to a llama-server, or put one on PATH`,
  };
}

/** Why the agent installs no llama.cpp on this platform, or undefined where it does. */
export function installUnavailable(platform: string, arch: string): string | undefined {
  if (platform === 'linux' && (arch === 'x64' || arch === 'arm64')) return undefined;
  return `llama.cpp publishes builds the agent installs for Linux x64 and arm64 only, and this node is ${platform} ${arch}`;
}

function configuredOf(i: LlamaBinInput): { bin: string; text: string } | undefined {
  if (i.local !== undefined)
    return { bin: i.local, text: `${setting.bin} = ${i.local} (this node's settings)` };
  if (i.sent !== undefined)
    return { bin: i.sent, text: `${setting.bin} = ${i.sent} (the control plane's settings)` };
  return undefined;
}
