/**
 * What discovery must report for the shared fixtures, whichever way it reads the machine
 * (NVML or nvidia-smi): both implementations are held to the same answer.
 */

/** The H100 in MIG mode (nvidia-smi fixture h100-mig-590, NVML scenario h100-mig): three instances, numbered as nvidia-smi -L numbers them. */
export const mixedMigH100Instances = [
  {
    index: 0,
    uuid: 'MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c',
    profile: '3g.40gb',
    gpu_instance_id: 2,
    compute_instance_id: 0,
    memory_total_mib: 40448,
    memory_used_mib: 7510,
    processes: [{ pid: 21198, name: './gpu_burn', memory_mib: 7484 }],
  },
  {
    index: 1,
    uuid: 'MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4',
    profile: '2g.20gb',
    gpu_instance_id: 3,
    compute_instance_id: 0,
    memory_total_mib: 20096,
    memory_used_mib: 13,
    processes: [],
  },
  {
    index: 2,
    uuid: 'MIG-7c1f0b9e-4d2a-5b7e-8f31-0a6c2e9d4b15',
    profile: '1g.10gb',
    gpu_instance_id: 9,
    compute_instance_id: 0,
    memory_total_mib: 9984,
    memory_used_mib: 6,
    processes: [],
  },
];

/** The na-everywhere machine: a card that supports none of the optional readings. */
export const naEverywhereCards = [
  {
    index: 0,
    uuid: 'GPU-1b724e78-eef5-4163-d43c-e4da15d41176',
    name: 'NVIDIA GeForce RTX 4070 Laptop GPU',
    class: 'rtx4070laptop-8g',
    pci_bus_id: '00000000:01:00.0',
    memory_total_mib: 8188,
    memory_used_mib: 0,
    wear: {},
    processes: [{ pid: 2210, name: '', memory_mib: 0 }],
    instances: [],
  },
];
