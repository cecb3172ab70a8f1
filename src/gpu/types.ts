/**
 * What a node has: its GPUs as the driver reports them, and its CPUs, memory and disk.
 * Discovery fills these in; the agent sends them to the control plane, which places
 * replicas on the devices derived from them (devices.ts).
 */

export interface GpuProcess {
  pid: number;
  /** Empty inside some containers. */
  name: string;
  memory_mib: number;
}

/** Signs a card is wearing out or needs a reset; each absent when the driver does not say. */
export interface Wear {
  /** Aggregate uncorrectable ECC errors (DRAM and SRAM). */
  ecc_uncorrectable?: number;
  /** Retired pages (cards before Ampere). */
  retired_pages?: number;
  /** Row remapping (Ampere and later): rows remapped for uncorrectable errors. */
  remapped_rows_uncorrectable?: number;
  /** A remapping waits for a GPU reset. */
  remapped_rows_pending?: boolean;
  /** Remapping failed: the card needs service. */
  remapped_rows_failure?: boolean;
}

/** A MIG device: one compute instance of one GPU instance of a card in MIG mode. */
export interface MigInstance {
  /** Its index under its card, as `nvidia-smi -L` lists it (from 0). */
  index: number;
  /** `MIG-<uuid>` (R470+), or `MIG-GPU-<uuid>/<gi>/<ci>` on older drivers. */
  uuid: string;
  /** `3g.40gb`, `1c.3g.71gb`, `1g.10gb+me`. */
  profile: string;
  gpu_instance_id: number;
  compute_instance_id: number;
  memory_total_mib: number;
  memory_used_mib: number;
  processes: GpuProcess[];
}

export interface Card {
  /** nvidia-smi's index: PCI bus order. */
  index: number;
  /** `GPU-<uuid>`. */
  uuid: string;
  /** As the driver prints it: `NVIDIA A100-SXM4-80GB`, `A100-PCIE-40GB`. */
  name: string;
  /** Lower-case model and memory, whatever the driver printed: `a100-80g` (classes.ts). */
  class: string;
  /** `00000000:4F:00.0`. */
  pci_bus_id: string;
  memory_total_mib: number;
  memory_used_mib: number;
  temperature_c?: number;
  power_w?: number;
  power_limit_w?: number;
  /** Absent in MIG mode, where the driver does not measure it (not zero). */
  utilization_pct?: number;
  wear: Wear;
  /** MIG mode now and after the next reset; absent on cards without MIG. */
  mig?: { current: boolean; pending: boolean };
  /** Processes on the whole card (not in MIG mode). */
  processes: GpuProcess[];
  /** Its MIG devices, in MIG mode. */
  instances: MigInstance[];
}

export type DiscoveryMethod = 'nvml' | 'nvidia-smi' | 'none';

export interface GpuInventory {
  /** The path that worked. */
  method: DiscoveryMethod;
  /** Why each path before it was not used: `nvml: libnvidia-ml.so.1 not found`. */
  reasons: string[];
  driver_version?: string;
  cuda_version?: string;
  cards: Card[];
}

/** One way of finding a node's GPUs. Throws DiscoveryError when its path does not work here. */
export interface GpuDiscovery {
  readonly method: Exclude<DiscoveryMethod, 'none'>;
  discover(): Promise<Omit<GpuInventory, 'method' | 'reasons'>>;
}

/** Why a discovery path is not usable: missing (no library, no binary) or broken (driver not loaded). */
export class DiscoveryError extends Error {
  /** `missing`: nothing of NVIDIA here. `unusable`: it is here but does not work (driver not loaded). */
  readonly kind: 'missing' | 'unusable';
  constructor(kind: 'missing' | 'unusable', message: string) {
    super(message);
    this.name = 'DiscoveryError';
    this.kind = kind;
  }
}

/** Something placement can put a shard on: a whole card, or one MIG instance. */
export interface Device {
  /** A whole card: its index. A MIG instance: 1000 + 100 × card + instance index. */
  id: number;
  /** What people see: `0`, or `0/mig1`. */
  label: string;
  /** `a100-80g`, or `a100-80g-mig-3g.40gb`. */
  class: string;
  card: number;
  /** What CUDA_VISIBLE_DEVICES takes: `GPU-…`, or `MIG-…` for an instance. */
  uuid: string;
  mig?: { profile: string; instance: number; gpu_instance_id: number; compute_instance_id: number };
  memory_total_mib: number;
  memory_used_mib: number;
  /** The card's, also on each of its instances. */
  temperature_c?: number;
  power_w?: number;
  /** Whole cards only. */
  utilization_pct?: number;
  wear: Wear;
  processes: GpuProcess[];
}

/** A card that offers no device, and why, in words an operator acts on. */
export interface ExcludedCard {
  card: number;
  uuid: string;
  class: string;
  reason: string;
}

export interface HostInfo {
  hostname: string;
  os: string;
  arch: string;
  cpus: { count: number; model: string };
  memory: { total_mib: number; free_mib: number };
  /** Free space where the agent keeps models and engines. */
  disk: { path: string; total_mib: number; free_mib: number };
}

/** Everything an agent reports about its machine. */
export interface NodeInventory {
  host: HostInfo;
  gpu: GpuInventory;
  agent_version: string;
  /** Where its engines listen, when the node says (agent.address); else where it connects from. */
  address?: string;
  /** The port of its engine proxy (TLS), once it serves: gateways elsewhere reach its engines there. */
  engine_proxy?: { port: number };
}
