/**
 * The part of NVML discovery uses, as typed calls. nvml-library.ts implements it over
 * libnvidia-ml.so.1 through koffi; a test may give NvmlDiscovery any other implementation.
 *
 * Each call answers NVML's return code, and its value on success; no call throws.
 */

/** nvmlReturn_t values discovery tells apart (nvml.h). */
export const nvmlReturn = {
  success: 0,
  uninitialized: 1,
  invalidArgument: 2,
  notSupported: 3,
  noPermission: 4,
  notFound: 6,
  insufficientSize: 7,
  driverNotLoaded: 9,
  libraryNotFound: 12,
  functionNotFound: 13,
  gpuIsLost: 15,
  unknown: 999,
} as const;

export type NvmlResult<T> = { ok: true; value: T } | { ok: false; rc: number };

/** A device handle (`nvmlDevice_t`), a card's or a MIG device's: only NVML reads it. */
export type NvmlHandle = unknown;

export interface NvmlMemory {
  totalBytes: number;
  usedBytes: number;
}

export interface NvmlProcess {
  pid: number;
  /** Undefined when NVML cannot tell (NVML_VALUE_NOT_AVAILABLE, e.g. on Windows WDDM). */
  usedBytes: number | undefined;
  /** 0xFFFFFFFF when the card is not in MIG mode. */
  gpuInstanceId: number;
  computeInstanceId: number;
}

export interface NvmlRemappedRows {
  corrected: number;
  uncorrected: number;
  pending: boolean;
  failure: boolean;
}

/** nvmlDeviceAttributes_t, the parts that name a MIG profile. */
export interface NvmlMigAttributes {
  gpuSlices: number;
  computeSlices: number;
  memoryMib: number;
  /** Holds decoders/JPEG/OFA: a `+me` profile when it has one slice. */
  media: boolean;
}

export interface NvmlApi {
  /** nvmlInit_v2. Asynchronous: it can take seconds on a machine without persistence mode. */
  init(): Promise<number>;
  shutdown(): number;
  errorString(rc: number): string;
  driverVersion(): NvmlResult<string>;
  /** nvmlSystemGetCudaDriverVersion: 13010 for CUDA 13.1. */
  cudaDriverVersion(): NvmlResult<number>;
  deviceCount(): NvmlResult<number>;
  handleByIndex(index: number): NvmlResult<NvmlHandle>;
  name(device: NvmlHandle): NvmlResult<string>;
  uuid(device: NvmlHandle): NvmlResult<string>;
  pciBusId(device: NvmlHandle): NvmlResult<string>;
  memory(device: NvmlHandle): NvmlResult<NvmlMemory>;
  /** Degrees C of the GPU sensor. */
  temperature(device: NvmlHandle): NvmlResult<number>;
  /** Milliwatts. */
  powerUsage(device: NvmlHandle): NvmlResult<number>;
  /** Milliwatts. */
  enforcedPowerLimit(device: NvmlHandle): NvmlResult<number>;
  /** Percent of time a kernel ran, over the last sample period. */
  gpuUtilization(device: NvmlHandle): NvmlResult<number>;
  /** Aggregate (lifetime) uncorrected ECC errors. */
  eccUncorrected(device: NvmlHandle): NvmlResult<number>;
  /** Pages retired for multiple single-bit errors plus for double-bit errors. */
  retiredPages(device: NvmlHandle): NvmlResult<number>;
  remappedRows(device: NvmlHandle): NvmlResult<NvmlRemappedRows>;
  computeProcesses(device: NvmlHandle): NvmlResult<NvmlProcess[]>;
  processName(pid: number): NvmlResult<string>;
  migMode(device: NvmlHandle): NvmlResult<{ current: boolean; pending: boolean }>;
  maxMigDeviceCount(device: NvmlHandle): NvmlResult<number>;
  migDeviceByIndex(device: NvmlHandle, index: number): NvmlResult<NvmlHandle>;
  gpuInstanceId(migDevice: NvmlHandle): NvmlResult<number>;
  computeInstanceId(migDevice: NvmlHandle): NvmlResult<number>;
  migAttributes(migDevice: NvmlHandle): NvmlResult<NvmlMigAttributes>;
}

/** The value, or undefined on any failure: for readings a card may not have. */
export function valueOf<T>(result: NvmlResult<T>): T | undefined {
  return result.ok ? result.value : undefined;
}
