import { cardClass } from '../classes.js';
import { migProfileOf } from '../mig-profiles.js';
import {
  DiscoveryError,
  type Card,
  type GpuDiscovery,
  type GpuInventory,
  type GpuProcess,
  type MigInstance,
  type Wear,
} from '../types.js';
import { nvmlReturn, valueOf, type NvmlApi, type NvmlHandle, type NvmlProcess } from './nvml-api.js';
import { defaultNvmlLibrary, openNvml } from './nvml-library.js';

export interface NvmlOptions {
  /** The library to load: a path, or a name the dynamic loader finds. Default `libnvidia-ml.so.1`. */
  library?: string;
  /** How to open it; tests may pass their own NvmlApi. Default: through koffi. */
  open?: (library: string) => Promise<NvmlApi>;
}

const mib = 1024 * 1024;
const profilePattern = /^(?:\d+c\.)?\d+g\.\d+gb(?:\+me)?$/;

/** GPU discovery through NVML, the library nvidia-smi itself reads. */
export class NvmlDiscovery implements GpuDiscovery {
  readonly method = 'nvml';
  readonly #library: string;
  readonly #open: (library: string) => Promise<NvmlApi>;
  #api: NvmlApi | undefined;
  /** One discovery at a time: NVML's init count is process-wide. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: NvmlOptions = {}) {
    this.#library =
      options.library === undefined || options.library === '' ? defaultNvmlLibrary : options.library;
    this.#open = options.open ?? openNvml;
  }

  discover(): Promise<Omit<GpuInventory, 'method' | 'reasons'>> {
    const run = this.#queue.then(() => this.#discover());
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #discover(): Promise<Omit<GpuInventory, 'method' | 'reasons'>> {
    // The library stays loaded between discoveries; NVML itself is started and stopped
    // each time, so the driver is not held open while the agent idles.
    this.#api ??= await this.#open(this.#library);
    const api = this.#api;
    const rc = await api.init();
    if (rc !== nvmlReturn.success) throw initFailure(api, rc);
    try {
      return readInventory(api);
    } finally {
      api.shutdown();
    }
  }
}

function initFailure(api: NvmlApi, rc: number): DiscoveryError {
  const said = `nvmlInit_v2: ${api.errorString(rc)}`;
  switch (rc) {
    case nvmlReturn.driverNotLoaded:
      return new DiscoveryError(
        'unusable',
        `NVIDIA driver not loaded (${said}): load it (modprobe nvidia) or reinstall it`,
      );
    case nvmlReturn.noPermission:
      return new DiscoveryError(
        'unusable',
        `no permission to open the GPUs (${said}): check access to /dev/nvidia*`,
      );
    default:
      return new DiscoveryError('unusable', `${said} (${rc})`);
  }
}

function readInventory(api: NvmlApi): Omit<GpuInventory, 'method' | 'reasons'> {
  const count = api.deviceCount();
  if (!count.ok) {
    throw new DiscoveryError('unusable', `nvmlDeviceGetCount_v2: ${api.errorString(count.rc)} (${count.rc})`);
  }
  const cards: Card[] = [];
  for (let index = 0; index < count.value; index++) {
    const handle = api.handleByIndex(index);
    // A card NVML cannot open (lost from the bus, or hidden from this container) is left
    // out; the others keep their indexes, which are nvidia-smi's.
    if (!handle.ok) continue;
    const card = readCard(api, handle.value, index);
    if (card !== undefined) cards.push(card);
  }
  const inventory: Omit<GpuInventory, 'method' | 'reasons'> = { cards };
  const driver = valueOf(api.driverVersion());
  const cuda = valueOf(api.cudaDriverVersion());
  if (driver !== undefined) inventory.driver_version = driver;
  if (cuda !== undefined) inventory.cuda_version = cudaVersionText(cuda);
  return inventory;
}

/** nvmlSystemGetCudaDriverVersion's 13010: `13.1`. */
export function cudaVersionText(version: number): string {
  return `${Math.floor(version / 1000)}.${Math.floor((version % 1000) / 10)}`;
}

function readCard(api: NvmlApi, handle: NvmlHandle, index: number): Card | undefined {
  const name = valueOf(api.name(handle));
  if (name === undefined) return undefined;
  const memory = valueOf(api.memory(handle));
  const memoryTotal = Math.round((memory?.totalBytes ?? 0) / mib);
  const migMode = valueOf(api.migMode(handle));
  const card: Card = {
    index,
    uuid: valueOf(api.uuid(handle)) ?? '',
    name,
    class: cardClass(name, memoryTotal),
    pci_bus_id: valueOf(api.pciBusId(handle)) ?? '',
    memory_total_mib: memoryTotal,
    memory_used_mib: Math.round((memory?.usedBytes ?? 0) / mib),
    wear: readWear(api, handle),
    processes: [],
    instances: [],
  };
  const temperature = valueOf(api.temperature(handle));
  const power = valueOf(api.powerUsage(handle));
  const limit = valueOf(api.enforcedPowerLimit(handle));
  if (temperature !== undefined) card.temperature_c = temperature;
  if (power !== undefined) card.power_w = watts(power);
  if (limit !== undefined) card.power_limit_w = watts(limit);
  if (migMode !== undefined) card.mig = migMode;
  if (migMode?.current === true) {
    // NVML answers NOT_SUPPORTED here; utilization is left out, not reported as zero.
    card.instances = readInstances(api, handle, card);
  } else {
    const utilization = valueOf(api.gpuUtilization(handle));
    if (utilization !== undefined) card.utilization_pct = utilization;
    card.processes = (valueOf(api.computeProcesses(handle)) ?? []).map((p) => gpuProcess(api, p));
  }
  return card;
}

function watts(milliwatts: number): number {
  return Math.round(milliwatts / 10) / 100;
}

function readWear(api: NvmlApi, handle: NvmlHandle): Wear {
  const wear: Wear = {};
  const ecc = valueOf(api.eccUncorrected(handle));
  const retired = valueOf(api.retiredPages(handle));
  const rows = valueOf(api.remappedRows(handle));
  if (ecc !== undefined) wear.ecc_uncorrectable = ecc;
  if (retired !== undefined) wear.retired_pages = retired;
  if (rows !== undefined) {
    wear.remapped_rows_uncorrectable = rows.uncorrected;
    wear.remapped_rows_pending = rows.pending;
    wear.remapped_rows_failure = rows.failure;
  }
  return wear;
}

/**
 * The card's MIG devices. NVML numbers handles 0..max-1 with gaps where nothing is
 * carved (NOT_FOUND); counting the ones found gives the `Device N` numbering
 * `nvidia-smi -L` prints, which walks the same handles in the same order.
 */
function readInstances(api: NvmlApi, handle: NvmlHandle, card: Card): MigInstance[] {
  const max = valueOf(api.maxMigDeviceCount(handle)) ?? 0;
  const instances: MigInstance[] = [];
  let parentProcesses: NvmlProcess[] | undefined;
  for (let slot = 0; slot < max; slot++) {
    const mig = api.migDeviceByIndex(handle, slot);
    if (!mig.ok) continue;
    const gi = valueOf(api.gpuInstanceId(mig.value));
    const ci = valueOf(api.computeInstanceId(mig.value));
    const memory = valueOf(api.memory(mig.value));
    const memoryTotal = Math.round((memory?.totalBytes ?? 0) / mib);
    const profile = profileOf(api, mig.value, card);
    if (gi === undefined || ci === undefined || profile === undefined) continue;
    // NVML lists a MIG device's processes on its own handle. Where that is refused, the
    // parent's list (which carries GI/CI ids) is split by instance instead.
    let processes = valueOf(api.computeProcesses(mig.value));
    if (processes === undefined) {
      parentProcesses ??= valueOf(api.computeProcesses(handle)) ?? [];
      processes = parentProcesses.filter((p) => p.gpuInstanceId === gi && p.computeInstanceId === ci);
    }
    instances.push({
      index: instances.length,
      uuid: valueOf(api.uuid(mig.value)) ?? '',
      profile,
      gpu_instance_id: gi,
      compute_instance_id: ci,
      memory_total_mib: memoryTotal,
      memory_used_mib: Math.round((memory?.usedBytes ?? 0) / mib),
      processes: processes.map((p) => gpuProcess(api, p)),
    });
  }
  return instances;
}

/**
 * The profile a MIG device's name ends with (`NVIDIA A100-SXM4-80GB MIG 3g.40gb`), else
 * one worked out from its slices and memory. Undefined when neither is readable.
 */
function profileOf(api: NvmlApi, mig: NvmlHandle, card: Card): string | undefined {
  const named = /\bMIG\s+(\S+)\s*$/.exec(valueOf(api.name(mig)) ?? '')?.[1];
  if (named !== undefined && profilePattern.test(named)) return named;
  const attributes = valueOf(api.migAttributes(mig));
  if (attributes === undefined || attributes.gpuSlices === 0) return undefined;
  return migProfileOf({
    cardGb: Number(/-(\d+)g$/.exec(card.class)?.[1] ?? 0),
    gpuSlices: attributes.gpuSlices,
    computeSlices: attributes.computeSlices,
    memoryMib: attributes.memoryMib,
    media: attributes.media && attributes.gpuSlices === 1,
  });
}

function gpuProcess(api: NvmlApi, p: NvmlProcess): GpuProcess {
  return {
    pid: p.pid,
    // Empty when the process is in another PID namespace (a container).
    name: valueOf(api.processName(p.pid)) ?? '',
    memory_mib: Math.round((p.usedBytes ?? 0) / mib),
  };
}
