import type { IKoffiLib } from 'koffi';

import { DiscoveryError } from '../types.js';
import {
  nvmlReturn,
  type NvmlApi,
  type NvmlHandle,
  type NvmlMigAttributes,
  type NvmlProcess,
  type NvmlResult,
} from './nvml-api.js';
import {
  aggregateEcc,
  bindFirst,
  declareTypes,
  driverVersionLength,
  memoryErrorUncorrected,
  nameLength,
  notAvailable64,
  olderNames,
  processNameLength,
  prototypes,
  required,
  retiredForDoubleBit,
  retiredForMultipleSingleBit,
  temperatureGpu,
  uuidLength,
  type Koffi,
  type Out,
  type Symbols,
  type Types,
} from './nvml-header.js';

/** NVML through koffi: opening the library, and each call as NvmlApi asks it. */

export const defaultNvmlLibrary = 'libnvidia-ml.so.1';

/**
 * Opens NVML. Throws DiscoveryError('missing') when the library (or koffi's native part)
 * does not load: a machine without the NVIDIA driver, which is not an error.
 */
export async function openNvml(path: string = defaultNvmlLibrary): Promise<NvmlApi> {
  let koffi: Koffi;
  try {
    // Imported here, not at the top: modules that only read devices never load koffi's
    // native code, and a broken koffi build reads as "no NVML" rather than a crash.
    koffi = (await import('koffi')).default;
  } catch (e) {
    throw new DiscoveryError('missing', `koffi did not load, so NVML cannot be called: ${messageOf(e)}`);
  }
  let lib: IKoffiLib;
  try {
    lib = koffi.load(path);
  } catch (e) {
    const detail = messageOf(e).replace(/^Failed to load shared library:\s*/, '');
    const what = /No such file|cannot open shared object/.test(detail) ? 'not found' : 'did not load';
    throw new DiscoveryError('missing', `${path} ${what} (${detail})`);
  }
  const types = declareTypes(koffi);
  const symbols: Partial<Record<keyof Symbols, unknown>> = {};
  for (const name of Object.keys(prototypes) as (keyof Symbols)[]) {
    const fn = bindFirst(lib, [prototypes[name], ...(olderNames[name] ?? [])]);
    if (fn !== undefined) symbols[name] = fn;
    else if (required.includes(name)) {
      throw new DiscoveryError('unusable', `${path} has no ${name}: the NVIDIA driver is too old`);
    }
  }
  return new KoffiNvml(koffi, symbols as Partial<Symbols>, types);
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

const missing = { ok: false, rc: nvmlReturn.functionNotFound } as const;

function ok<T>(value: T): NvmlResult<T> {
  return { ok: true, value };
}

function failed(rc: number): NvmlResult<never> {
  return { ok: false, rc };
}

/** A char buffer NVML filled: the text up to the first NUL. */
function cString(buffer: Buffer): string {
  const end = buffer.indexOf(0);
  return buffer.toString('utf8', 0, end === -1 ? buffer.length : end);
}

/** koffi gives unsigned long long as a number when it fits, else a BigInt. */
function u64(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return value === notAvailable64 ? undefined : Number(value);
  return undefined;
}

class KoffiNvml implements NvmlApi {
  readonly #koffi: Koffi;
  readonly #fn: Partial<Symbols>;
  readonly #types: Types;

  constructor(koffi: Koffi, symbols: Partial<Symbols>, types: Types) {
    this.#koffi = koffi;
    this.#fn = symbols;
    this.#types = types;
  }

  init(): Promise<number> {
    const init = this.#fn.nvmlInit_v2;
    if (init === undefined) return Promise.resolve(nvmlReturn.functionNotFound);
    return new Promise((resolve, reject) => {
      init.async((error, rc) => {
        if (error !== null && error !== undefined)
          reject(error instanceof Error ? error : new Error(messageOf(error)));
        else resolve(rc);
      });
    });
  }

  shutdown(): number {
    return this.#fn.nvmlShutdown?.() ?? nvmlReturn.functionNotFound;
  }

  errorString(rc: number): string {
    return this.#fn.nvmlErrorString?.(rc) ?? `NVML error ${rc}`;
  }

  driverVersion(): NvmlResult<string> {
    const fn = this.#fn.nvmlSystemGetDriverVersion;
    if (fn === undefined) return missing;
    const buffer = Buffer.alloc(driverVersionLength);
    const rc = fn(buffer, buffer.length);
    return rc === nvmlReturn.success ? ok(cString(buffer)) : failed(rc);
  }

  cudaDriverVersion(): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlSystemGetCudaDriverVersion?.(out));
  }

  deviceCount(): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetCount_v2?.(out));
  }

  handleByIndex(index: number): NvmlResult<NvmlHandle> {
    const fn = this.#fn.nvmlDeviceGetHandleByIndex_v2;
    if (fn === undefined) return missing;
    const out: Out<NvmlHandle> = [null];
    const rc = fn(index, out);
    return rc === nvmlReturn.success ? ok(out[0]) : failed(rc);
  }

  name(device: NvmlHandle): NvmlResult<string> {
    return this.#text(nameLength, (buffer) => this.#fn.nvmlDeviceGetName?.(device, buffer, buffer.length));
  }

  uuid(device: NvmlHandle): NvmlResult<string> {
    return this.#text(uuidLength, (buffer) => this.#fn.nvmlDeviceGetUUID?.(device, buffer, buffer.length));
  }

  pciBusId(device: NvmlHandle): NvmlResult<string> {
    const fn = this.#fn.nvmlDeviceGetPciInfo_v3;
    if (fn === undefined) return missing;
    const info: Record<string, unknown> = {};
    const rc = fn(device, info);
    if (rc !== nvmlReturn.success) return failed(rc);
    return ok(typeof info['busId'] === 'string' ? info['busId'] : '');
  }

  memory(device: NvmlHandle): NvmlResult<{ totalBytes: number; usedBytes: number }> {
    const fn = this.#fn.nvmlDeviceGetMemoryInfo;
    if (fn === undefined) return missing;
    const info: Record<string, unknown> = {};
    const rc = fn(device, info);
    if (rc !== nvmlReturn.success) return failed(rc);
    return ok({ totalBytes: u64(info['total']) ?? 0, usedBytes: u64(info['used']) ?? 0 });
  }

  temperature(device: NvmlHandle): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetTemperature?.(device, temperatureGpu, out));
  }

  powerUsage(device: NvmlHandle): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetPowerUsage?.(device, out));
  }

  enforcedPowerLimit(device: NvmlHandle): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetEnforcedPowerLimit?.(device, out));
  }

  gpuUtilization(device: NvmlHandle): NvmlResult<number> {
    const fn = this.#fn.nvmlDeviceGetUtilizationRates;
    if (fn === undefined) return missing;
    const rates: Record<string, unknown> = {};
    const rc = fn(device, rates);
    if (rc !== nvmlReturn.success) return failed(rc);
    return typeof rates['gpu'] === 'number' ? ok(rates['gpu']) : failed(nvmlReturn.unknown);
  }

  eccUncorrected(device: NvmlHandle): NvmlResult<number> {
    const fn = this.#fn.nvmlDeviceGetTotalEccErrors;
    if (fn === undefined) return missing;
    const out: Out<number | bigint> = [0];
    const rc = fn(device, memoryErrorUncorrected, aggregateEcc, out);
    if (rc !== nvmlReturn.success) return failed(rc);
    const count = u64(out[0]);
    return count === undefined ? failed(nvmlReturn.notSupported) : ok(count);
  }

  retiredPages(device: NvmlHandle): NvmlResult<number> {
    const fn = this.#fn.nvmlDeviceGetRetiredPages;
    if (fn === undefined) return missing;
    let total = 0;
    for (const cause of [retiredForMultipleSingleBit, retiredForDoubleBit]) {
      // A count of 0 asks only how many: INSUFFICIENT_SIZE with the count when there are some.
      const count: Out<number> = [0];
      const rc = fn(device, cause, count, null);
      if (rc !== nvmlReturn.success && rc !== nvmlReturn.insufficientSize) return failed(rc);
      total += count[0];
    }
    return ok(total);
  }

  remappedRows(
    device: NvmlHandle,
  ): NvmlResult<{ corrected: number; uncorrected: number; pending: boolean; failure: boolean }> {
    const fn = this.#fn.nvmlDeviceGetRemappedRows;
    if (fn === undefined) return missing;
    const corrected: Out<number> = [0];
    const uncorrected: Out<number> = [0];
    const pending: Out<number> = [0];
    const failure: Out<number> = [0];
    const rc = fn(device, corrected, uncorrected, pending, failure);
    if (rc !== nvmlReturn.success) return failed(rc);
    return ok({
      corrected: corrected[0],
      uncorrected: uncorrected[0],
      pending: pending[0] !== 0,
      failure: failure[0] !== 0,
    });
  }

  computeProcesses(device: NvmlHandle): NvmlResult<NvmlProcess[]> {
    const fn = this.#fn.nvmlDeviceGetComputeRunningProcesses_v3;
    if (fn === undefined) return missing;
    const size = this.#koffi.sizeof(this.#types.processInfo);
    // Processes come and go between the sizing call and the reading one: retry a few times
    // with room to spare.
    let room = 0;
    for (let attempt = 0; attempt < 4; attempt++) {
      const count: Out<number> = [room];
      const buffer = room === 0 ? null : Buffer.alloc(room * size);
      const rc = fn(device, count, buffer);
      if (rc === nvmlReturn.insufficientSize) {
        room = count[0] + 4;
        continue;
      }
      if (rc !== nvmlReturn.success) return failed(rc);
      return ok(buffer === null ? [] : this.#readProcesses(buffer, count[0], size));
    }
    return failed(nvmlReturn.insufficientSize);
  }

  #readProcesses(buffer: Buffer, count: number, size: number): NvmlProcess[] {
    const processes: NvmlProcess[] = [];
    for (let i = 0; i < count; i++) {
      const info: unknown = this.#koffi.decode(buffer, i * size, this.#types.processInfo);
      const field = (name: string): unknown =>
        typeof info === 'object' && info !== null ? (info as Record<string, unknown>)[name] : undefined;
      processes.push({
        pid: Number(field('pid')),
        usedBytes: u64(field('usedGpuMemory')),
        gpuInstanceId: Number(field('gpuInstanceId')),
        computeInstanceId: Number(field('computeInstanceId')),
      });
    }
    return processes;
  }

  processName(pid: number): NvmlResult<string> {
    return this.#text(processNameLength, (buffer) =>
      this.#fn.nvmlSystemGetProcessName?.(pid, buffer, buffer.length),
    );
  }

  migMode(device: NvmlHandle): NvmlResult<{ current: boolean; pending: boolean }> {
    const fn = this.#fn.nvmlDeviceGetMigMode;
    if (fn === undefined) return missing;
    const current: Out<number> = [0];
    const pending: Out<number> = [0];
    const rc = fn(device, current, pending);
    if (rc !== nvmlReturn.success) return failed(rc);
    return ok({ current: current[0] === 1, pending: pending[0] === 1 });
  }

  maxMigDeviceCount(device: NvmlHandle): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetMaxMigDeviceCount?.(device, out));
  }

  migDeviceByIndex(device: NvmlHandle, index: number): NvmlResult<NvmlHandle> {
    const fn = this.#fn.nvmlDeviceGetMigDeviceHandleByIndex;
    if (fn === undefined) return missing;
    const out: Out<NvmlHandle> = [null];
    const rc = fn(device, index, out);
    return rc === nvmlReturn.success ? ok(out[0]) : failed(rc);
  }

  gpuInstanceId(migDevice: NvmlHandle): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetGpuInstanceId?.(migDevice, out));
  }

  computeInstanceId(migDevice: NvmlHandle): NvmlResult<number> {
    return this.#unsigned((out) => this.#fn.nvmlDeviceGetComputeInstanceId?.(migDevice, out));
  }

  migAttributes(migDevice: NvmlHandle): NvmlResult<NvmlMigAttributes> {
    const fn = this.#fn.nvmlDeviceGetAttributes_v2;
    if (fn === undefined) return missing;
    const a: Record<string, unknown> = {};
    const rc = fn(migDevice, a);
    if (rc !== nvmlReturn.success) return failed(rc);
    const media =
      Number(a['sharedDecoderCount']) + Number(a['sharedJpegCount']) + Number(a['sharedOfaCount']) > 0;
    return ok({
      gpuSlices: Number(a['gpuInstanceSliceCount']),
      computeSlices: Number(a['computeInstanceSliceCount']),
      memoryMib: u64(a['memorySizeMB']) ?? 0,
      media,
    });
  }

  /** A call with one unsigned output; undefined from `call` means the symbol is missing. */
  #unsigned(call: (out: Out<number>) => number | undefined): NvmlResult<number> {
    const out: Out<number> = [0];
    const rc = call(out);
    if (rc === undefined) return missing;
    return rc === nvmlReturn.success ? ok(out[0]) : failed(rc);
  }

  #text(length: number, call: (buffer: Buffer) => number | undefined): NvmlResult<string> {
    const buffer = Buffer.alloc(length);
    const rc = call(buffer);
    if (rc === undefined) return missing;
    return rc === nvmlReturn.success ? ok(cString(buffer)) : failed(rc);
  }
}
