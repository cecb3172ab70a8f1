import { devicesOf } from '../gpu/devices.js';
import type { Card, DiscoveryMethod, GpuProcess, HostInfo } from '../gpu/types.js';

import { installUnavailable, llamaBin, type InstalledRef, type LlamaBinSource } from './llama-bin.js';
import type { DaemonKind, GpuRequestKind } from './shards/container/types.js';

/**
 * What is wrong on this node, as `llmgw doctor` reports it. A pure function of what was
 * probed (discovery paths, engines, the control plane), so each warning is tested on
 * its own. Field names are part of the `--json` contract scripts rely on.
 */

export interface PathResult {
  method: Exclude<DiscoveryMethod, 'none'>;
  ok: boolean;
  /** missing: nothing of NVIDIA there; unusable: there, but broken (driver not loaded). */
  kind?: 'missing' | 'unusable';
  reason?: string;
  driver_version?: string;
  cuda_version?: string;
  cards?: Card[];
}

export interface EngineProbe {
  name: string;
  found: boolean;
  /** Not here, but the agent installs it when a replica needs it (llama.cpp, with no bin set). */
  installs?: boolean;
  /** llama-server: where the one the agent runs comes from (llama-bin.ts); install: it installs one. */
  source?: Exclude<LlamaBinSource, 'waiting'> | 'install' | 'none';
  path?: string;
  detail?: string;
}

export interface ControlPlaneProbe {
  url: string;
  reachable: boolean;
  version?: string;
  error?: string;
  token?: { accepted: boolean; name?: string; expires_at?: string | null; error?: string };
}

/** The container daemon, asked only where a profile or a setting runs engines as containers. */
export interface ContainerDaemonProbe {
  /** What uses containers: `model m profile p has runtime: container`, `agent.containers.host is set`. */
  wanted_by: string;
  answers: boolean;
  address?: string;
  kind?: DaemonKind;
  version?: string;
  api_version?: string;
  /** The daemon's runtimes (/info Runtimes): `nvidia` is the NVIDIA Container Toolkit's. */
  runtimes?: string[];
  cdi?: boolean;
  /** How the agent would hand GPUs to containers there (agent.containers.gpus, auto resolved). */
  gpu_request?: GpuRequestKind;
  error?: string;
}

export interface DoctorInput {
  paths: PathResult[];
  engines: EngineProbe[];
  host: HostInfo;
  controlPlane?: ControlPlaneProbe;
  containers?: ContainerDaemonProbe;
}

/**
 * Every finding, and what it means for this node: `cannot_serve` (exit status 1) or
 * `notice`, worth knowing but no reason the node cannot serve (exit status 0).
 */
export const doctorFindings = {
  driver_not_loaded: 'cannot_serve',
  mig_no_instances: 'cannot_serve',
  mig_pending_reset: 'cannot_serve',
  no_engine: 'cannot_serve',
  control_plane_unreachable: 'cannot_serve',
  token_refused: 'cannot_serve',
  container_daemon_unreachable: 'cannot_serve',
  container_gpu_runtime_missing: 'cannot_serve',
  gpu_reset_pending: 'notice',
  gpu_remap_failed: 'notice',
  ecc_uncorrectable: 'notice',
} as const satisfies Record<string, 'cannot_serve' | 'notice'>;

export type DoctorCode = keyof typeof doctorFindings;

export interface DoctorWarning {
  code: DoctorCode;
  message: string;
  /** This node cannot serve until it is fixed. */
  blocking: boolean;
}

function warning(code: DoctorCode, message: string): DoctorWarning {
  return { code, message, blocking: doctorFindings[code] === 'cannot_serve' };
}

export interface DoctorCard {
  index: number;
  uuid: string;
  name: string;
  class: string;
  mode: 'whole' | 'mig';
  memory_total_mib: number;
  memory_used_mib: number;
  temperature_c?: number;
  power_w?: number;
  utilization_pct?: number;
  processes: GpuProcess[];
  instances: {
    id: number;
    label: string;
    uuid: string;
    profile: string;
    class: string;
    memory_total_mib: number;
    memory_used_mib: number;
    processes: GpuProcess[];
  }[];
}

export interface DoctorReport {
  discovery: { method: DiscoveryMethod; reasons: string[] };
  driver_version?: string;
  cuda_version?: string;
  cards: DoctorCard[];
  host: HostInfo;
  engines: EngineProbe[];
  control_plane?: ControlPlaneProbe;
  containers?: ContainerDaemonProbe;
  warnings: DoctorWarning[];
  /** 1 when a warning means the node cannot serve (a `blocking` one), else 0. */
  exit_code: 0 | 1;
}

export function diagnose(input: DoctorInput): DoctorReport {
  const warnings: DoctorWarning[] = [];
  const working = input.paths.find((p) => p.ok);
  const reasons = input.paths.filter((p) => !p.ok).map((p) => `${p.method}: ${p.reason ?? 'not usable'}`);

  const unusable = input.paths.filter((p) => !p.ok && p.kind === 'unusable');
  if (unusable.length > 0 && working === undefined) {
    warnings.push(
      warning(
        'driver_not_loaded',
        `NVIDIA's tools are installed but the driver does not answer (${unusable.map((p) => `${p.method}: ${p.reason ?? ''}`).join('; ')}): load it (modprobe nvidia, or reinstall the driver for this kernel) and run llmgw doctor again`,
      ),
    );
  }

  const cards = working?.cards ?? [];
  const { devices, excluded } = devicesOf(cards);
  for (const x of excluded) {
    const card = cards.find((c) => c.index === x.card);
    const pending = card?.mig !== undefined && card.mig.pending !== card.mig.current;
    warnings.push(
      warning(
        pending ? 'mig_pending_reset' : 'mig_no_instances',
        `card ${x.card} (${x.class}) can run nothing: ${x.reason}`,
      ),
    );
  }
  for (const c of cards) {
    if (c.wear.remapped_rows_pending === true) {
      warnings.push(
        warning(
          'gpu_reset_pending',
          `card ${c.index} (${c.class}) has remapped memory rows waiting for a reset: reset it (nvidia-smi -r -i ${c.index}) when it is idle`,
        ),
      );
    }
    if (c.wear.remapped_rows_failure === true) {
      warnings.push(
        warning(
          'gpu_remap_failed',
          `card ${c.index} (${c.class}) failed to remap a memory row: it needs service; drain it`,
        ),
      );
    }
    if ((c.wear.ecc_uncorrectable ?? 0) > 0) {
      warnings.push(
        warning(
          'ecc_uncorrectable',
          `card ${c.index} (${c.class}) has had ${c.wear.ecc_uncorrectable ?? 0} uncorrectable ECC errors: watch it, and drain it if the count grows`,
        ),
      );
    }
  }

  // Engines run from their images where a container daemon answers: none need be installed.
  const engine = input.containers?.answers === true ? undefined : noEngine(input.engines, devices.length > 0);
  if (engine !== undefined) warnings.push(warning('no_engine', engine));

  const cp = input.controlPlane;
  if (cp !== undefined) {
    if (!cp.reachable)
      warnings.push(
        warning(
          'control_plane_unreachable',
          `the control plane at ${cp.url} does not answer (${cp.error ?? 'no answer'}): check the URL, the network and its firewall`,
        ),
      );
    else if (cp.token !== undefined && !cp.token.accepted)
      warnings.push(
        warning(
          'token_refused',
          `the control plane refuses the join token: ${cp.token.error ?? 'not valid'}`,
        ),
      );
  }

  const containers = input.containers;
  const problem = containers === undefined ? undefined : containerProblem(containers, devices.length > 0);
  if (problem !== undefined) warnings.push(problem);

  return {
    discovery: { method: working?.method ?? 'none', reasons },
    ...(working?.driver_version === undefined ? {} : { driver_version: working.driver_version }),
    ...(working?.cuda_version === undefined ? {} : { cuda_version: working.cuda_version }),
    cards: cards.map((c) => doctorCard(c, devices)),
    host: input.host,
    engines: input.engines,
    ...(cp === undefined ? {} : { control_plane: cp }),
    ...(containers === undefined ? {} : { containers }),
    warnings,
    exit_code: warnings.some((w) => w.blocking) ? 1 : 0,
  };
}

/**
 * A daemon that does not answer; or, on a GPU node, one that cannot give containers GPUs
 * the way the agent would ask (Docker then refuses with `could not select device driver
 * "nvidia"`, which would otherwise read as an engine that keeps failing).
 */
function containerProblem(c: ContainerDaemonProbe, hasGpu: boolean): DoctorWarning | undefined {
  if (!c.answers)
    return warning(
      'container_daemon_unreachable',
      `${c.wanted_by}, but ${c.error ?? 'no container daemon answers'}`,
    );
  if (!hasGpu) return undefined;
  const daemon = `${c.kind === 'podman' ? 'Podman' : 'Docker'} at ${c.address ?? '?'}`;
  if (c.gpu_request === 'cdi' && c.cdi !== true)
    return warning(
      'container_gpu_runtime_missing',
      `${daemon} resolves no CDI devices, so it cannot give containers this node's GPUs by CDI name: generate NVIDIA's CDI spec (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml) and enable CDI in the daemon, or set agent.containers.gpus: nvidia`,
    );
  if (c.gpu_request === 'nvidia' && !(c.runtimes ?? []).includes('nvidia'))
    return warning(
      'container_gpu_runtime_missing',
      `${daemon} lists no nvidia runtime, so GPU containers fail there (the daemon says: could not select device driver "nvidia"): install the NVIDIA Container Toolkit, run nvidia-ctk runtime configure --runtime=docker and restart the daemon${c.cdi === true ? ', or set agent.containers.gpus: cdi (the daemon resolves CDI devices)' : ''}`,
    );
  return undefined;
}

/** The doctor's line about the container daemon. */
export function containersLine(c: ContainerDaemonProbe): string {
  if (!c.answers) return `no daemon answers (${c.wanted_by})`;
  const gpus =
    c.gpu_request === undefined
      ? ''
      : `; GPUs by ${c.gpu_request === 'cdi' ? 'CDI name' : 'the nvidia runtime'}`;
  return `${c.kind ?? '?'} ${c.version ?? '?'} (${c.kind === 'podman' ? 'libpod API' : 'API'} ${c.api_version ?? '?'}) at ${c.address ?? '?'}; runtimes: ${(c.runtimes ?? []).join(', ') || 'none listed'}; CDI: ${c.cdi === true ? 'yes' : 'no'}${gpus}`;
}

/**
 * Why nothing can run here, or undefined when something can: llama.cpp (found, or one the
 * agent installs) runs on CPUs and GPUs alike; vLLM, SGLang and TensorRT-LLM need a GPU.
 */
function noEngine(engines: readonly EngineProbe[], hasGpu: boolean): string | undefined {
  const llama = engines.find((e) => e.name === 'llama-server');
  if (llama?.found === true || llama?.installs === true) return undefined;
  if (hasGpu && engines.some((e) => e.name !== 'llama-server' && e.found)) return undefined;
  // The refusal says already what to set.
  if (llama?.source === 'none' && llama.detail !== undefined)
    return `nothing can run on this node${hasGpu ? ' (no GPU engine, vllm, sglang or trtllm-serve, is installed either)' : ''}: ${llama.detail}`;
  const why = llama?.detail === undefined ? 'there is no llama-server' : `llama-server: ${llama.detail}`;
  return `nothing can run on this node: ${why}${hasGpu ? ', and no GPU engine (vllm, sglang, trtllm-serve) is installed' : ', and it has no GPU'}: set agent.engines.llamacpp.bin to a llama-server that runs here, or leave it unset on Linux x64 or arm64 for the agent to install llama.cpp`;
}

/**
 * What the doctor says of llama-server: the one the agent would run and why, in
 * llama-bin.ts's order. The doctor tries no install: with nothing installed or configured,
 * it says the agent installs one (and what PATH offers should that fail).
 */
export function llamaServerProbe(o: {
  /** agent.engines.llamacpp.bin in this node's settings. */
  bin: string | undefined;
  binRuns: boolean;
  /** The agent's checked install of this build and flavour (installer/marker.ts). */
  installed: InstalledRef | undefined;
  onPath: string | undefined;
  platform: string;
  arch: string;
  /** `b10587-cpu`: the build and flavour the agent would install here. */
  key: string;
}): EngineProbe {
  const unavailable = installUnavailable(o.platform, o.arch);
  const c = llamaBin({
    key: o.key,
    installed: o.installed,
    local: o.bin,
    sent: undefined,
    install:
      unavailable === undefined ? { state: 'not_tried' } : { state: 'unavailable', reason: unavailable },
    onPath: o.onPath,
  });
  const name = 'llama-server';
  switch (c.source) {
    case 'configured':
      return o.binRuns
        ? { name, found: true, path: c.bin, source: c.source, detail: c.why }
        : {
            name,
            found: false,
            source: c.source,
            detail: `agent.engines.llamacpp.bin is ${c.bin}, which does not exist or cannot run`,
          };
    case 'installed':
    case 'path':
      return { name, found: true, path: c.bin, source: c.source, detail: c.why };
    case 'waiting':
      return { name, found: false, installs: true, source: 'install', detail: c.why };
    case 'none':
      return { name, found: false, source: c.source, detail: c.why };
  }
}

/** The doctor's line for an engine: for llama-server, which one runs and why. */
export function engineLine(e: EngineProbe): string {
  const name = e.name.padEnd(13);
  if (e.source !== undefined && e.detail !== undefined && (e.found || e.source !== 'configured'))
    return `  ${name} ${e.detail}`;
  const state = e.found ? `found: ${e.path ?? ''}` : e.installs === true ? 'to be installed' : 'not found';
  return `  ${name} ${state}${e.detail === undefined ? '' : ` (${e.detail})`}`;
}

function doctorCard(c: Card, devices: ReturnType<typeof devicesOf>['devices']): DoctorCard {
  const mig = c.mig?.current === true;
  return {
    index: c.index,
    uuid: c.uuid,
    name: c.name,
    class: c.class,
    mode: mig ? 'mig' : 'whole',
    memory_total_mib: c.memory_total_mib,
    memory_used_mib: c.memory_used_mib,
    ...(c.temperature_c === undefined ? {} : { temperature_c: c.temperature_c }),
    ...(c.power_w === undefined ? {} : { power_w: c.power_w }),
    ...(c.utilization_pct === undefined || mig ? {} : { utilization_pct: c.utilization_pct }),
    processes: c.processes,
    instances: devices
      .filter((d) => d.card === c.index && d.mig !== undefined)
      .map((d) => ({
        id: d.id,
        label: d.label,
        uuid: d.uuid,
        profile: d.mig?.profile ?? '',
        class: d.class,
        memory_total_mib: d.memory_total_mib,
        memory_used_mib: d.memory_used_mib,
        processes: d.processes,
      })),
  };
}
