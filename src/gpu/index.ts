export * from './classes.js';
export * from './devices.js';
export * from './discover.js';
export { NvidiaSmiDiscovery, type NvidiaSmiOptions } from './nvidia-smi/nvidia-smi-discovery.js';
export { NvmlDiscovery, type NvmlOptions } from './nvml/nvml-discovery.js';
export * from './types.js';
