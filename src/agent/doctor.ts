import { devicesOf } from '../gpu/devices.js';
import type { Card, DiscoveryMethod, GpuProcess, HostInfo } from '../gpu/types.js';

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

export interface DoctorInput {
  paths: PathResult[];
  engines: EngineProbe[];
  host: HostInfo;
  controlPlane?: ControlPlaneProbe;
}

export interface DoctorWarning {
  code: string;
  message: string;
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
  warnings: DoctorWarning[];
  /** 1 when a card can run nothing or a driver is present but unusable. */
  exit_code: 0 | 1;
}

export function diagnose(input: DoctorInput): DoctorReport {
  const warnings: DoctorWarning[] = [];
  const working = input.paths.find((p) => p.ok);
  const reasons = input.paths.filter((p) => !p.ok).map((p) => `${p.method}: ${p.reason ?? 'not usable'}`);
  let blocking = false;

  const unusable = input.paths.filter((p) => !p.ok && p.kind === 'unusable');
  if (unusable.length > 0 && working === undefined) {
    blocking = true;
    warnings.push({
      code: 'driver_not_loaded',
      message: `NVIDIA's tools are installed but the driver does not answer (${unusable.map((p) => `${p.method}: ${p.reason ?? ''}`).join('; ')}): load it (modprobe nvidia, or reinstall the driver for this kernel) and run llmgw doctor again`,
    });
  }

  const cards = working?.cards ?? [];
  const { devices, excluded } = devicesOf(cards);
  for (const x of excluded) {
    blocking = true;
    const card = cards.find((c) => c.index === x.card);
    const pending = card?.mig !== undefined && card.mig.pending !== card.mig.current;
    warnings.push({ code: pending ? 'mig_pending_reset' : 'mig_no_instances', message: `card ${x.card} (${x.class}) can run nothing: ${x.reason}` });
  }
  for (const c of cards) {
    if (c.wear.remapped_rows_pending === true) {
      warnings.push({ code: 'gpu_reset_pending', message: `card ${c.index} (${c.class}) has remapped memory rows waiting for a reset: reset it (nvidia-smi -r -i ${c.index}) when it is idle` });
    }
    if (c.wear.remapped_rows_failure === true) {
      warnings.push({ code: 'gpu_remap_failed', message: `card ${c.index} (${c.class}) failed to remap a memory row: it needs service; drain it` });
    }
    if ((c.wear.ecc_uncorrectable ?? 0) > 0) {
      warnings.push({ code: 'ecc_uncorrectable', message: `card ${c.index} (${c.class}) has had ${c.wear.ecc_uncorrectable ?? 0} uncorrectable ECC errors: watch it, and drain it if the count grows` });
    }
  }

  const llama = input.engines.find((e) => e.name === 'llama-server');
  if (devices.length === 0 && excluded.length === 0 && llama?.found !== true) {
    warnings.push({
      code: 'no_engine',
      message:
        'this node has no GPU and no llama.cpp server, so nothing can run on it: let the agent install llama.cpp when it joins (leave agent.engines.llamacpp.bin unset), or set agent.engines.llamacpp.bin to a llama-server binary',
    });
  }

  const cp = input.controlPlane;
  if (cp !== undefined) {
    if (!cp.reachable) warnings.push({ code: 'control_plane_unreachable', message: `the control plane at ${cp.url} does not answer (${cp.error ?? 'no answer'}): check the URL, the network and its firewall` });
    else if (cp.token !== undefined && !cp.token.accepted) warnings.push({ code: 'token_refused', message: `the control plane refuses the join token: ${cp.token.error ?? 'not valid'}` });
  }

  return {
    discovery: { method: working?.method ?? 'none', reasons },
    ...(working?.driver_version === undefined ? {} : { driver_version: working.driver_version }),
    ...(working?.cuda_version === undefined ? {} : { cuda_version: working.cuda_version }),
    cards: cards.map((c) => doctorCard(c, devices)),
    host: input.host,
    engines: input.engines,
    ...(cp === undefined ? {} : { control_plane: cp }),
    warnings,
    exit_code: blocking ? 1 : 0,
  };
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
