import type * as KoffiModule from 'koffi';
import type { IKoffiCType, IKoffiLib } from 'koffi';

import type { NvmlHandle } from './nvml-api.js';

/**
 * nvml.h as koffi reads it: the versioned symbols (`nvmlInit_v2`, …`_v3`), because nvml.h
 * maps the plain names to them with macros an FFI never sees, and the header's struct layouts.
 */

export type Koffi = typeof KoffiModule.default;

/** nvml.h buffer sizes: NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE. */
export const nameLength = 96;
export const uuidLength = 96;
export const driverVersionLength = 80;
export const processNameLength = 256;
/** NVML_VALUE_NOT_AVAILABLE for unsigned long long fields. */
export const notAvailable64 = 0xffff_ffff_ffff_ffffn;

/** nvml.h enums, passed as int. */
export const temperatureGpu = 0;
export const memoryErrorUncorrected = 1;
export const aggregateEcc = 1;
export const retiredForMultipleSingleBit = 0;
export const retiredForDoubleBit = 1;

export type Out<T> = [T];

export interface Symbols {
  nvmlInit_v2: { (): number; async: (done: (error: unknown, rc: number) => void) => void };
  nvmlShutdown: () => number;
  nvmlErrorString: (rc: number) => string;
  nvmlSystemGetDriverVersion: (version: Buffer, length: number) => number;
  nvmlSystemGetCudaDriverVersion: (version: Out<number>) => number;
  nvmlDeviceGetCount_v2: (count: Out<number>) => number;
  nvmlDeviceGetHandleByIndex_v2: (index: number, device: Out<NvmlHandle>) => number;
  nvmlDeviceGetName: (device: NvmlHandle, name: Buffer, length: number) => number;
  nvmlDeviceGetUUID: (device: NvmlHandle, uuid: Buffer, length: number) => number;
  nvmlDeviceGetPciInfo_v3: (device: NvmlHandle, pci: Record<string, unknown>) => number;
  nvmlDeviceGetMemoryInfo: (device: NvmlHandle, memory: Record<string, unknown>) => number;
  nvmlDeviceGetTemperature: (device: NvmlHandle, sensor: number, temperature: Out<number>) => number;
  nvmlDeviceGetPowerUsage: (device: NvmlHandle, milliwatts: Out<number>) => number;
  nvmlDeviceGetEnforcedPowerLimit: (device: NvmlHandle, milliwatts: Out<number>) => number;
  nvmlDeviceGetUtilizationRates: (device: NvmlHandle, utilization: Record<string, unknown>) => number;
  nvmlDeviceGetTotalEccErrors: (
    device: NvmlHandle,
    errorType: number,
    counter: number,
    count: Out<number | bigint>,
  ) => number;
  nvmlDeviceGetRetiredPages: (
    device: NvmlHandle,
    cause: number,
    count: Out<number>,
    addresses: null,
  ) => number;
  /** Outputs: corrected rows, uncorrected rows, pending, failure occurred. */
  nvmlDeviceGetRemappedRows: (
    device: NvmlHandle,
    ...rows: [Out<number>, Out<number>, Out<number>, Out<number>]
  ) => number;
  nvmlDeviceGetComputeRunningProcesses_v3: (
    device: NvmlHandle,
    count: Out<number>,
    infos: Buffer | null,
  ) => number;
  nvmlSystemGetProcessName: (pid: number, name: Buffer, length: number) => number;
  nvmlDeviceGetMigMode: (device: NvmlHandle, current: Out<number>, pending: Out<number>) => number;
  nvmlDeviceGetMaxMigDeviceCount: (device: NvmlHandle, count: Out<number>) => number;
  nvmlDeviceGetMigDeviceHandleByIndex: (
    device: NvmlHandle,
    index: number,
    migDevice: Out<NvmlHandle>,
  ) => number;
  nvmlDeviceGetGpuInstanceId: (device: NvmlHandle, id: Out<number>) => number;
  nvmlDeviceGetComputeInstanceId: (device: NvmlHandle, id: Out<number>) => number;
  nvmlDeviceGetAttributes_v2: (device: NvmlHandle, attributes: Record<string, unknown>) => number;
}

/** C prototypes as in nvml.h; koffi parses them. Enums are `int`. */
export const prototypes: Readonly<Record<keyof Symbols, string>> = {
  nvmlInit_v2: 'int nvmlInit_v2(void)',
  nvmlShutdown: 'int nvmlShutdown(void)',
  nvmlErrorString: 'const char *nvmlErrorString(int result)',
  nvmlSystemGetDriverVersion: 'int nvmlSystemGetDriverVersion(_Out_ char *version, unsigned int length)',
  nvmlSystemGetCudaDriverVersion: 'int nvmlSystemGetCudaDriverVersion(_Out_ int *version)',
  nvmlDeviceGetCount_v2: 'int nvmlDeviceGetCount_v2(_Out_ unsigned int *count)',
  nvmlDeviceGetHandleByIndex_v2:
    'int nvmlDeviceGetHandleByIndex_v2(unsigned int index, _Out_ nvmlDevice_t *device)',
  nvmlDeviceGetName: 'int nvmlDeviceGetName(nvmlDevice_t device, _Out_ char *name, unsigned int length)',
  nvmlDeviceGetUUID: 'int nvmlDeviceGetUUID(nvmlDevice_t device, _Out_ char *uuid, unsigned int length)',
  nvmlDeviceGetPciInfo_v3: 'int nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, _Out_ nvmlPciInfo_t *pci)',
  nvmlDeviceGetMemoryInfo: 'int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, _Out_ nvmlMemory_t *memory)',
  nvmlDeviceGetTemperature:
    'int nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, _Out_ unsigned int *temp)',
  nvmlDeviceGetPowerUsage: 'int nvmlDeviceGetPowerUsage(nvmlDevice_t device, _Out_ unsigned int *power)',
  nvmlDeviceGetEnforcedPowerLimit:
    'int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, _Out_ unsigned int *limit)',
  nvmlDeviceGetUtilizationRates:
    'int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, _Out_ nvmlUtilization_t *utilization)',
  nvmlDeviceGetTotalEccErrors:
    'int nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType, _Out_ unsigned long long *count)',
  nvmlDeviceGetRetiredPages:
    'int nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, _Inout_ unsigned int *pageCount, unsigned long long *addresses)',
  nvmlDeviceGetRemappedRows:
    'int nvmlDeviceGetRemappedRows(nvmlDevice_t device, _Out_ unsigned int *corrRows, _Out_ unsigned int *uncRows, _Out_ unsigned int *isPending, _Out_ unsigned int *failureOccurred)',
  // The process array is a Buffer read with nvmlProcessInfo_t's layout (see readProcesses).
  nvmlDeviceGetComputeRunningProcesses_v3:
    'int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, _Inout_ unsigned int *infoCount, void *infos)',
  nvmlSystemGetProcessName:
    'int nvmlSystemGetProcessName(unsigned int pid, _Out_ char *name, unsigned int length)',
  nvmlDeviceGetMigMode:
    'int nvmlDeviceGetMigMode(nvmlDevice_t device, _Out_ unsigned int *currentMode, _Out_ unsigned int *pendingMode)',
  nvmlDeviceGetMaxMigDeviceCount:
    'int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, _Out_ unsigned int *count)',
  nvmlDeviceGetMigDeviceHandleByIndex:
    'int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, _Out_ nvmlDevice_t *migDevice)',
  nvmlDeviceGetGpuInstanceId: 'int nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, _Out_ unsigned int *id)',
  nvmlDeviceGetComputeInstanceId:
    'int nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, _Out_ unsigned int *id)',
  nvmlDeviceGetAttributes_v2:
    'int nvmlDeviceGetAttributes_v2(nvmlDevice_t device, _Out_ nvmlDeviceAttributes_t *attributes)',
};

/** Without these nothing can be listed; every other symbol is read when there. */
export const required: readonly (keyof Symbols)[] = [
  'nvmlInit_v2',
  'nvmlShutdown',
  'nvmlDeviceGetCount_v2',
  'nvmlDeviceGetHandleByIndex_v2',
  'nvmlDeviceGetName',
  'nvmlDeviceGetUUID',
  'nvmlDeviceGetMemoryInfo',
];

/**
 * Older symbols with the same arguments, for drivers that lack the newest: _v2 of the
 * process list takes the same nvmlProcessInfo_t as _v3 (R450 to R510).
 */
export const olderNames: Partial<Record<keyof Symbols, readonly string[]>> = {
  nvmlDeviceGetComputeRunningProcesses_v3: [
    prototypes.nvmlDeviceGetComputeRunningProcesses_v3.replace('_v3(', '_v2('),
  ],
};

/** The first prototype whose symbol the library has. */
export function bindFirst(lib: IKoffiLib, candidates: readonly string[]): unknown {
  for (const prototype of candidates) {
    try {
      return lib.func(prototype);
    } catch {
      // Not exported by this driver (remapped rows before R460, _v3 processes before R510).
    }
  }
  return undefined;
}

export interface Types {
  processInfo: IKoffiCType;
}

/** koffi's type names are process-wide: declared once, whichever library is opened. */
let declared: Types | undefined;

export function declareTypes(koffi: Koffi): Types {
  if (declared !== undefined) return declared;
  try {
    // Declared already by another copy of this module in the same process (test runners
    // evaluate modules afresh; koffi's native registry stays).
    declared = { processInfo: koffi.resolve('nvmlProcessInfo_t') };
    return declared;
  } catch {
    // The first time in this process: declare them below.
  }
  koffi.pointer('nvmlDevice_t', koffi.opaque('nvmlDevice_st'));
  koffi.struct('nvmlMemory_t', {
    total: 'unsigned long long',
    free: 'unsigned long long',
    used: 'unsigned long long',
  });
  koffi.struct('nvmlUtilization_t', { gpu: 'unsigned int', memory: 'unsigned int' });
  koffi.struct('nvmlPciInfo_t', {
    busIdLegacy: koffi.array('char', 16),
    domain: 'unsigned int',
    bus: 'unsigned int',
    device: 'unsigned int',
    pciDeviceId: 'unsigned int',
    pciSubSystemId: 'unsigned int',
    busId: koffi.array('char', 32),
  });
  koffi.struct('nvmlDeviceAttributes_t', {
    multiprocessorCount: 'unsigned int',
    sharedCopyEngineCount: 'unsigned int',
    sharedDecoderCount: 'unsigned int',
    sharedEncoderCount: 'unsigned int',
    sharedJpegCount: 'unsigned int',
    sharedOfaCount: 'unsigned int',
    gpuInstanceSliceCount: 'unsigned int',
    computeInstanceSliceCount: 'unsigned int',
    memorySizeMB: 'unsigned long long',
  });
  // nvmlProcessInfo_v2_t: C alignment puts 4 bytes after pid, 24 in all.
  const processInfo = koffi.struct('nvmlProcessInfo_t', {
    pid: 'unsigned int',
    usedGpuMemory: 'unsigned long long',
    gpuInstanceId: 'unsigned int',
    computeInstanceId: 'unsigned int',
  });
  declared = { processInfo };
  return declared;
}
