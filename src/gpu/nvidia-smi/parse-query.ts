import { XMLParser } from 'fast-xml-parser';

import type { Wear } from '../types.js';
import { child, children, enabled, firstOf, numeric, sumOf, text, yesNo } from './xml-values.js';

/**
 * `nvidia-smi -q -x`: everything about each card but MIG devices' UUIDs and profiles,
 * which only `-L` prints (join-smi.ts puts the two together).
 *
 * Written for the v11 and v12 DTDs (drivers up to 590) and the element names each
 * generation used; see docs of each reader below.
 */

export interface QueriedProcess {
  pid: number;
  name: string;
  memoryMib: number;
  /** Which MIG device it runs on; absent outside MIG mode (`N/A`). */
  gpuInstanceId?: number;
  computeInstanceId?: number;
}

export interface QueriedInstance {
  /** The index `nvidia-smi -L` shows as `Device N`. */
  index: number;
  gpuInstanceId: number;
  computeInstanceId: number;
  memoryTotalMib?: number;
  memoryUsedMib?: number;
}

export interface QueriedGpu {
  /** The `id` attribute: the PCI bus id. */
  busId: string;
  name: string;
  uuid: string;
  memoryTotalMib?: number;
  memoryUsedMib?: number;
  temperatureC?: number;
  powerW?: number;
  powerLimitW?: number;
  utilizationPct?: number;
  wear: Wear;
  /** Absent when the card has no MIG (`N/A`). */
  mig?: { current: boolean; pending: boolean };
  instances: QueriedInstance[];
  /** All of the card's processes, MIG devices' included (they are listed under the card). */
  processes: QueriedProcess[];
}

export interface SmiQuery {
  driverVersion?: string;
  cudaVersion?: string;
  /** In the XML's order, which is nvidia-smi's index order. */
  gpus: QueriedGpu[];
}

/** Thrown when the text is not nvidia-smi's XML at all. */
export class SmiQueryFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SmiQueryFormatError';
  }
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  // Values keep their units and `N/A`; xml-values.ts reads them.
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
});

export function parseSmiQuery(xml: string): SmiQuery {
  let doc: unknown;
  try {
    doc = parser.parse(xml);
  } catch (e) {
    throw new SmiQueryFormatError(`not XML: ${e instanceof Error ? e.message : String(e)}`);
  }
  const log = child(doc, 'nvidia_smi_log');
  if (log === undefined || log === null || typeof log !== 'object') {
    throw new SmiQueryFormatError('no <nvidia_smi_log> element');
  }
  const query: SmiQuery = { gpus: children(log, 'gpu').map(readGpu) };
  const driver = text(child(log, 'driver_version'));
  const cuda = text(child(log, 'cuda_version'));
  if (driver !== undefined) query.driverVersion = driver;
  if (cuda !== undefined) query.cudaVersion = cuda;
  return query;
}

function readGpu(gpu: Record<string, unknown>): QueriedGpu {
  const pci = text(child(gpu, 'pci', 'pci_bus_id'));
  const result: QueriedGpu = {
    busId: text(gpu['@_id']) ?? pci ?? '',
    name: text(child(gpu, 'product_name')) ?? '',
    uuid: text(child(gpu, 'uuid')) ?? '',
    wear: readWear(gpu),
    instances: children(child(gpu, 'mig_devices'), 'mig_device').map(readInstance),
    processes: children(child(gpu, 'processes'), 'process_info').map(readProcess),
  };
  const memoryTotal = numeric(child(gpu, 'fb_memory_usage', 'total'));
  const memoryUsed = numeric(child(gpu, 'fb_memory_usage', 'used'));
  const temperature = numeric(child(gpu, 'temperature', 'gpu_temp'));
  const power = readPowerDraw(gpu);
  const powerLimit = readPowerLimit(gpu);
  const utilization = numeric(child(gpu, 'utilization', 'gpu_util'));
  if (memoryTotal !== undefined) result.memoryTotalMib = memoryTotal;
  if (memoryUsed !== undefined) result.memoryUsedMib = memoryUsed;
  if (temperature !== undefined) result.temperatureC = temperature;
  if (power !== undefined) result.powerW = power;
  if (powerLimit !== undefined) result.powerLimitW = powerLimit;
  if (utilization !== undefined) result.utilizationPct = utilization;
  const current = enabled(child(gpu, 'mig_mode', 'current_mig'));
  const pending = enabled(child(gpu, 'mig_mode', 'pending_mig'));
  if (current !== undefined) result.mig = { current, pending: pending ?? current };
  return result;
}

/**
 * Power draw moved twice: `<power_readings><power_draw>` up to 530,
 * `<gpu_power_readings><power_draw>` from 535, and `<average_power_draw>` beside
 * `<instant_power_draw>` by 575. The average is what `power_draw` used to be.
 */
function readPowerDraw(gpu: unknown): number | undefined {
  const current = child(gpu, 'gpu_power_readings');
  const old = child(gpu, 'power_readings');
  return firstOf([
    numeric(child(current, 'average_power_draw')),
    numeric(child(current, 'power_draw')),
    numeric(child(current, 'instant_power_draw')),
    numeric(child(old, 'power_draw')),
  ]);
}

/** Up to 530: `enforced_power_limit` (what holds) or `power_limit`; from 535 `current_power_limit`. */
function readPowerLimit(gpu: unknown): number | undefined {
  const current = child(gpu, 'gpu_power_readings');
  const old = child(gpu, 'power_readings');
  return firstOf([
    numeric(child(current, 'current_power_limit')),
    numeric(child(current, 'enforced_power_limit')),
    numeric(child(old, 'enforced_power_limit')),
    numeric(child(old, 'power_limit')),
  ]);
}

function readWear(gpu: unknown): Wear {
  const wear: Wear = {};
  const ecc = readEccUncorrectable(child(gpu, 'ecc_errors', 'aggregate'));
  if (ecc !== undefined) wear.ecc_uncorrectable = ecc;
  const retired = child(gpu, 'retired_pages');
  const pages = sumOf([
    numeric(child(retired, 'multiple_single_bit_retirement', 'retired_count')),
    numeric(child(retired, 'double_bit_retirement', 'retired_count')),
  ]);
  if (pages !== undefined) wear.retired_pages = pages;
  const rows = child(gpu, 'remapped_rows');
  const unc = numeric(child(rows, 'remapped_row_unc'));
  const pending = yesNo(child(rows, 'remapped_row_pending'));
  const failure = yesNo(child(rows, 'remapped_row_failure'));
  if (unc !== undefined) wear.remapped_rows_uncorrectable = unc;
  if (pending !== undefined) wear.remapped_rows_pending = pending;
  if (failure !== undefined) wear.remapped_rows_failure = failure;
  return wear;
}

/**
 * Aggregate uncorrectable ECC errors, in whichever names the driver used: before Ampere
 * `<double_bit><total>`; Ampere and later `sram_uncorrectable` + `dram_uncorrectable`,
 * with SRAM split into `_parity` and `_secded` from 555.
 */
function readEccUncorrectable(aggregate: unknown): number | undefined {
  const oldStyle = numeric(child(aggregate, 'double_bit', 'total'));
  if (oldStyle !== undefined) return oldStyle;
  return sumOf([
    numeric(child(aggregate, 'sram_uncorrectable')),
    numeric(child(aggregate, 'sram_uncorrectable_parity')),
    numeric(child(aggregate, 'sram_uncorrectable_secded')),
    numeric(child(aggregate, 'dram_uncorrectable')),
  ]);
}

function readInstance(node: Record<string, unknown>): QueriedInstance {
  const instance: QueriedInstance = {
    index: numeric(child(node, 'index')) ?? -1,
    gpuInstanceId: numeric(child(node, 'gpu_instance_id')) ?? -1,
    computeInstanceId: numeric(child(node, 'compute_instance_id')) ?? -1,
  };
  const total = numeric(child(node, 'fb_memory_usage', 'total'));
  const used = numeric(child(node, 'fb_memory_usage', 'used'));
  if (total !== undefined) instance.memoryTotalMib = total;
  if (used !== undefined) instance.memoryUsedMib = used;
  return instance;
}

function readProcess(node: Record<string, unknown>): QueriedProcess {
  const process: QueriedProcess = {
    pid: numeric(child(node, 'pid')) ?? 0,
    // Empty inside containers, where the process is in another PID namespace.
    name: text(child(node, 'process_name')) ?? '',
    memoryMib: numeric(child(node, 'used_memory')) ?? 0,
  };
  const gi = numeric(child(node, 'gpu_instance_id'));
  const ci = numeric(child(node, 'compute_instance_id'));
  if (gi !== undefined) process.gpuInstanceId = gi;
  if (ci !== undefined) process.computeInstanceId = ci;
  return process;
}
