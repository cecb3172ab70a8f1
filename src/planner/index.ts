/**
 * The memory planner: pure functions from a model's shape, a profile and a device class to
 * what each card needs as its engine budgets it, whether that fits, the largest context that
 * does, and why not. No I/O: callers read shapes, files' sizes and nodes' memory.
 */
export { changeGpus, type GpusChange, type GpusChangeInput, type GpusSide, MAX_GPUS } from './change-gpus.js';
export { withClassesThatFit } from './classes-that-fit.js';
export { classMemoryBytes, knownCardClasses, migClassesOf } from './class-memory.js';
export { type HeadsCheck, splitsHeads, tensorParallelSizes } from './heads.js';
export { kvLayers, type KvLayers } from './kv-cache.js';
export { fewestCards, planProfile } from './plan.js';
export { formatOf, type PlanEngine, planEngine, type WeightFormat } from './plan-engine.js';
export {
  type ClassMemory,
  type OptionsInput,
  type PlanAnswer,
  type PlanOption,
  planOptions,
} from './options.js';
export type { CardMemory, MemoryPlan, ModelDims, PlanDevice, PlanProfile, WeightLayout } from './types.js';
export type { PlanInput } from './plan-input.js';
export { GIB, gib, MIB, toGib } from './units.js';
export { layoutFromTensors, weightBytes } from './weights.js';
