import { describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import type { Device, ExcludedCard } from '../gpu/types.js';

import { place } from './place.js';
import type { PendingReplica, PlacementInput, PlacementNode, Shard } from './types.js';

const A100 = 'a100-80g';
const MIG3 = 'a100-80g-mig-3g.40gb';

function card(id: number, cls = A100): Device {
  return {
    id,
    label: `${id}`,
    class: cls,
    card: id,
    uuid: `GPU-${id}`,
    memory_total_mib: 81920,
    memory_used_mib: 0,
    wear: {},
    processes: [],
  };
}

function cards(n: number, cls = A100, from = 0): Device[] {
  return Array.from({ length: n }, (_, i) => card(from + i, cls));
}

/** A MIG instance, numbered as placement numbers them: 1000 + 100 × card + instance. */
function mig(onCard: number, instance: number, profile = '3g.40gb', cardClass = A100): Device {
  return {
    id: 1000 + 100 * onCard + instance,
    label: `${onCard}/mig${instance}`,
    class: `${cardClass}-mig-${profile}`,
    card: onCard,
    uuid: `MIG-${onCard}-${instance}`,
    mig: { profile, instance, gpu_instance_id: instance + 1, compute_instance_id: 0 },
    memory_total_mib: 40960,
    memory_used_mib: 0,
    wear: {},
    processes: [],
  };
}

function node(
  name: string,
  o: {
    devices?: Device[];
    ready?: boolean;
    cpus?: number;
    memory_mib?: number;
    excluded?: ExcludedCard[];
    portsTaken?: [number, number][];
  } = {},
): PlacementNode {
  return {
    name,
    ready: o.ready ?? true,
    devices: o.devices ?? [],
    excluded: o.excluded ?? [],
    cpus: o.cpus ?? 32,
    memory_mib: o.memory_mib ?? 262144,
    address: `10.0.0.${name.length}`,
    ...(o.portsTaken === undefined
      ? {}
      : { ports_taken: o.portsTaken.map(([first, last]) => ({ first, last })) }),
  };
}

function profile(p: Partial<ProfileSpec>): ProfileSpec {
  return {
    name: 'main',
    engine: 'vllm',
    tp: 1,
    pp: 1,
    gpus_per_node: 1,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    ...p,
  };
}

/** A GPU profile of `perNode` cards of a class on each of `nodes` nodes. */
function gpu(cls: string, perNode = 1, nodes = 1, name = 'main'): ProfileSpec {
  return profile({ name, gpu_class: cls, tp: perNode * nodes, gpus_per_node: perNode, nodes });
}

function cpu(o: { name?: string; min_memory_gb?: number } = {}): ProfileSpec {
  return profile({
    name: o.name ?? 'cpu',
    engine: 'llamacpp',
    cpu: true,
    gpus_per_node: 0,
    ...(o.min_memory_gb === undefined ? {} : { min_memory_gb: o.min_memory_gb }),
  });
}

function model(name: string, replicas: number, ...profiles: ProfileSpec[]): ModelSpec {
  return { name, source: `/models/${name}.gguf`, replicas, profiles };
}

function shard(s: Partial<Shard> & Pick<Shard, 'replica' | 'model' | 'node' | 'port'>): Shard {
  return { profile: 'main', rank: 0, ranks: 1, devices: [], ...s };
}

/** Replica ids `MODEL-1`, `MODEL-2`, … per model, as a store's counter would make them. */
function counter(): (model: string) => string {
  const next = new Map<string, number>();
  return (m) => {
    const n = (next.get(m) ?? 0) + 1;
    next.set(m, n);
    return `${m}-${n}`;
  };
}

function input(o: Partial<Omit<PlacementInput, 'newReplicaId'>>): PlacementInput {
  return {
    models: o.models ?? [],
    nodes: o.nodes ?? [],
    shards: o.shards ?? [],
    ports: o.ports ?? { first: 20000, last: 20009 },
    cpuThreads: o.cpuThreads ?? 0,
    newReplicaId: counter(),
    ...(o.pinned === undefined ? {} : { pinned: o.pinned }),
  };
}

/** One line per shard, so a table row reads as what runs where. */
function brief(s: Shard): string {
  const dist = s.dist_port === undefined ? '' : ` dist ${s.dist_port}`;
  const cpuPart = s.threads === undefined ? '' : ` t${s.threads} m${s.memory_mib ?? '?'}`;
  return `${s.replica}@${s.profile} ${s.node} ${s.rank}/${s.ranks} [${s.devices.join(',')}] :${s.port}${dist}${cpuPart}`;
}

interface Expected {
  /** Shards added, in the order placement returns them. */
  added?: string[];
  /** Shards removed: `REPLICA NODE RANK/RANKS`. */
  removed?: string[];
  pending?: PendingReplica[];
}

function pending(m: string, count: number, reason: string): PendingReplica {
  return { model: m, count, reason };
}

const x1 = model('x', 1, gpu(A100));

const cases: [string, PlacementInput, Expected][] = [
  // Whole cards, spread and best fit.
  [
    'a whole-card replica takes the lowest free cards and the lowest port',
    input({ nodes: [node('node-a', { devices: cards(4) })], models: [model('m', 1, gpu(A100, 2))] }),
    { added: ['m-1@main node-a 0/1 [0,1] :20000'] },
  ],
  [
    'replicas of a model spread one per node before any node gets a second',
    input({
      nodes: [
        node('node-c', { devices: cards(8) }),
        node('node-a', { devices: cards(8) }),
        node('node-b', { devices: cards(8) }),
      ],
      models: [model('m', 4, gpu(A100))],
    }),
    {
      added: [
        'm-1@main node-a 0/1 [0] :20000',
        'm-2@main node-b 0/1 [0] :20000',
        'm-3@main node-c 0/1 [0] :20000',
        'm-4@main node-a 0/1 [1] :20001',
      ],
    },
  ],
  [
    'among nodes with as many replicas, the fewest free cards that fit (keeps big holes)',
    input({
      nodes: [
        node('node-a', { devices: cards(8) }),
        node('node-b', { devices: cards(2) }),
        node('node-c', { devices: cards(1) }),
      ],
      models: [model('m', 1, gpu(A100, 2))],
    }),
    { added: ['m-1@main node-b 0/1 [0,1] :20000'] },
  ],
  [
    'spread comes before best fit, and kept replicas count',
    input({
      nodes: [node('node-a', { devices: cards(8) }), node('node-b', { devices: cards(2) })],
      models: [model('m', 3, gpu(A100))],
      shards: [shard({ replica: 'old', model: 'm', node: 'node-b', devices: [0], port: 20000 })],
    }),
    { added: ['m-1@main node-a 0/1 [0] :20000', 'm-2@main node-b 0/1 [1] :20001'] },
  ],
  [
    'cards of another class are not taken',
    input({
      nodes: [node('node-a', { devices: [card(0, 'l4-24g'), card(1, A100)] })],
      models: [model('m', 1, gpu(A100))],
    }),
    { added: ['m-1@main node-a 0/1 [1] :20000'] },
  ],
  [
    'models are placed in the order given: the first takes the room',
    input({
      nodes: [node('node-a', { devices: cards(2) })],
      models: [model('first', 1, gpu(A100, 2)), model('second', 1, gpu(A100))],
    }),
    {
      added: ['first-1@main node-a 0/1 [0,1] :20000'],
      pending: [pending('second', 1, 'no ready node has a free a100-80g card (node-a: 2 of 2 in use)')],
    },
  ],

  // Profiles.
  [
    'profiles are tried in order: the first that fits wins',
    input({
      nodes: [node('node-a', { devices: [card(0, 'h100-80g'), card(1)] })],
      models: [model('m', 1, gpu('h100-80g', 1, 1, 'h100'), gpu(A100, 1, 1, 'a100'))],
    }),
    { added: ['m-1@h100 node-a 0/1 [0] :20000'] },
  ],
  [
    'the next profile takes a replica the first has no room for',
    input({
      nodes: [node('node-a', { devices: [card(0, 'h100-80g'), card(1)] })],
      models: [model('m', 3, gpu('h100-80g', 1, 1, 'h100'), gpu(A100, 1, 1, 'a100'), cpu())],
    }),
    {
      added: [
        'm-1@h100 node-a 0/1 [0] :20000',
        'm-2@a100 node-a 0/1 [1] :20001',
        'm-3@cpu node-a 0/1 [] :20002 t16 m1024',
      ],
    },
  ],

  // Multi-node replicas.
  [
    'a multi-node replica: one rank per node, rank 0 on the best node with the port the others join at',
    input({
      nodes: [
        node('node-a', { devices: cards(4) }),
        node('node-b', { devices: cards(8) }),
        node('node-c', { devices: cards(4) }),
      ],
      models: [model('m', 1, gpu(A100, 4, 2))],
    }),
    { added: ['m-1@main node-a 0/2 [0,1,2,3] :20000 dist 20001', 'm-1@main node-c 1/2 [0,1,2,3] :20000'] },
  ],
  [
    'multi-node replicas spread over nodes without a replica of the model first',
    input({
      nodes: ['node-a', 'node-b', 'node-c', 'node-d'].map((n) => node(n, { devices: cards(8) })),
      models: [model('m', 3, gpu(A100, 4, 2))],
    }),
    {
      added: [
        'm-1@main node-a 0/2 [0,1,2,3] :20000 dist 20001',
        'm-1@main node-b 1/2 [0,1,2,3] :20000',
        'm-2@main node-c 0/2 [0,1,2,3] :20000 dist 20001',
        'm-2@main node-d 1/2 [0,1,2,3] :20000',
        'm-3@main node-a 0/2 [4,5,6,7] :20002 dist 20003',
        'm-3@main node-b 1/2 [4,5,6,7] :20001',
      ],
    },
  ],
  [
    'a multi-node replica is placed whole or not at all: the node it could not use stays free (the reason is the end state)',
    input({
      nodes: [node('node-a', { devices: cards(4) }), node('node-b', { devices: cards(2) })],
      models: [model('big', 1, gpu(A100, 4, 2)), model('small', 1, gpu(A100, 4))],
    }),
    {
      added: ['small-1@main node-a 0/1 [0,1,2,3] :20000'],
      pending: [
        pending(
          'big',
          1,
          'a replica needs 2 ready nodes with 4 free a100-80g cards each, and none has them (node-b: 2 free, node-a: 4 of 4 in use)',
        ),
      ],
    },
  ],
  [
    'a multi-node replica short of one node',
    input({
      nodes: [
        node('node-a', { devices: cards(4) }),
        node('node-b', { devices: cards(2) }),
        node('node-c', { devices: cards(4) }),
      ],
      models: [model('m', 1, gpu(A100, 4, 3))],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'a replica needs 3 ready nodes with 4 free a100-80g cards each, and only 2 have them (node-b: 2 free)',
        ),
      ],
    },
  ],
  [
    'the head of a multi-node replica needs two free ports',
    input({
      nodes: [node('node-a', { devices: cards(4) }), node('node-b', { devices: cards(4) })],
      models: [model('m', 1, gpu(A100, 4, 2))],
      ports: { first: 20000, last: 20000 },
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'a replica needs 2 ready nodes with 4 free a100-80g cards each, and none of the 2 that have them has the 2 free ports the head needs (node-a and node-b: 1 free port)',
        ),
      ],
    },
  ],
  [
    'a multi-node replica with no node to start on',
    input({ nodes: [node('node-a', { devices: cards(2) })], models: [model('m', 2, gpu(A100, 8, 2))] }),
    {
      pending: [
        pending(
          'm',
          2,
          'a replica needs 2 ready nodes with 8 free a100-80g cards each, and none has them (node-a: 2 free)',
        ),
      ],
    },
  ],

  // MIG.
  [
    'a MIG profile takes exactly one instance of its class',
    input({
      nodes: [node('node-a', { devices: [mig(0, 0), mig(0, 1), mig(1, 0, '1g.10gb'), card(2)] })],
      models: [model('m', 2, gpu(MIG3))],
    }),
    { added: ['m-1@main node-a 0/1 [1000] :20000', 'm-2@main node-a 0/1 [1001] :20001'] },
  ],
  [
    'a whole-card profile never takes a MIG instance of that card',
    input({
      nodes: [node('node-b', { devices: [mig(0, 0), mig(0, 1)] })],
      models: [model('m', 1, gpu(A100))],
    }),
    {
      pending: [pending('m', 1, 'no ready node has a free a100-80g card (node-b: MIG mode, no whole cards)')],
    },
  ],
  [
    'a MIG profile with tp 2 is refused again in placement',
    input({
      nodes: [node('node-a', { devices: [mig(0, 0), mig(0, 1)] })],
      models: [model('m', 1, profile({ gpu_class: MIG3, tp: 2, gpus_per_node: 2 }))],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'a100-80g-mig-3g.40gb is a MIG instance and a replica on MIG runs on exactly one instance, but the profile asks for tp 2, gpus_per_node 2: set them to 1, or use a whole-card class such as a100-80g',
        ),
      ],
    },
  ],
  [
    'a MIG profile over two nodes is refused, and the next profile used',
    input({
      nodes: [node('node-a', { devices: [mig(0, 0), card(1)] }), node('node-b', { devices: [mig(0, 0)] })],
      models: [
        model('m', 1, profile({ name: 'mig', gpu_class: MIG3, tp: 2, nodes: 2 }), gpu(A100, 1, 1, 'whole')),
      ],
    }),
    { added: ['m-1@whole node-a 0/1 [1] :20000'] },
  ],
  [
    'MIG: every instance of the class in use',
    input({
      nodes: [node('node-c', { devices: [mig(0, 0), mig(0, 1)] })],
      models: [model('x', 2, gpu(MIG3)), model('m', 1, gpu(MIG3))],
      shards: [
        shard({ replica: 'x-1', model: 'x', node: 'node-c', devices: [1000], port: 20000 }),
        shard({ replica: 'x-2', model: 'x', node: 'node-c', devices: [1001], port: 20001 }),
      ],
    }),
    {
      pending: [
        pending('m', 1, 'no ready node has a free a100-80g-mig-3g.40gb instance (node-c: 2 of 2 in use)'),
      ],
    },
  ],
  [
    'MIG: a node carved into other instances, a node not in MIG mode',
    input({
      nodes: [
        node('node-a', { devices: [mig(0, 0, '1g.10gb'), mig(0, 1, '1g.10gb'), mig(1, 0, '2g.20gb')] }),
        node('node-b', { devices: cards(2) }),
      ],
      models: [model('m', 1, gpu(MIG3))],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'no ready node has a free a100-80g-mig-3g.40gb instance (node-a: no 3g.40gb instances (has 1g.10gb and 2g.20gb), node-b: MIG mode off)',
        ),
      ],
    },
  ],
  [
    'MIG: a card waiting for a reset to enter MIG mode explains why there is no instance',
    input({
      nodes: [
        node('node-a', {
          excluded: [
            {
              card: 0,
              uuid: 'GPU-0',
              class: A100,
              reason:
                'MIG mode change to enabled waits for a GPU reset: reset it (nvidia-smi -r -i 0) or reboot',
            },
          ],
        }),
      ],
      models: [model('m', 1, gpu(MIG3))],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'no ready node has a free a100-80g-mig-3g.40gb instance (node-a: 1 card excluded (MIG mode change to enabled waits for a GPU reset))',
        ),
      ],
    },
  ],
  [
    'MIG: a refused profile says why in the reason of its model',
    input({
      nodes: [node('node-a', { devices: cards(1) })],
      models: [
        model('m', 1, profile({ name: 'mig', gpu_class: MIG3, nodes: 2, tp: 2 }), gpu('l4-24g', 1, 1, 'l4')),
      ],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'profile mig: a100-80g-mig-3g.40gb is a MIG instance and a replica on MIG runs on exactly one instance, but the profile asks for tp 2, nodes 2: set them to 1, or use a whole-card class such as a100-80g; profile l4: no node has l4-24g cards (classes here: a100-80g)',
        ),
      ],
    },
  ],
  [
    'MIG: no node has the class or its card',
    input({ nodes: [node('node-a', { devices: cards(1, 'l4-24g') })], models: [model('m', 1, gpu(MIG3))] }),
    { pending: [pending('m', 1, 'no node has a100-80g-mig-3g.40gb instances (classes here: l4-24g)')] },
  ],

  // CPU.
  [
    "a CPU replica reserves half the node's CPUs and 1 GiB by default",
    input({ nodes: [node('node-a', { cpus: 8, memory_mib: 16384 })], models: [model('m', 1, cpu())] }),
    { added: ['m-1@cpu node-a 0/1 [] :20000 t4 m1024'] },
  ],
  [
    'a CPU replica reserves the threads setting and min_memory_gb',
    input({
      nodes: [node('node-a', { cpus: 8, memory_mib: 16384 })],
      models: [model('m', 1, cpu({ min_memory_gb: 8 }))],
      cpuThreads: 6,
    }),
    { added: ['m-1@cpu node-a 0/1 [] :20000 t6 m8192'] },
  ],
  [
    "a node's CPU threads are never reserved past its CPUs",
    input({ nodes: [node('node-a', { cpus: 8, memory_mib: 16384 })], models: [model('m', 3, cpu())] }),
    {
      added: ['m-1@cpu node-a 0/1 [] :20000 t4 m1024', 'm-2@cpu node-a 0/1 [] :20001 t4 m1024'],
      pending: [
        pending(
          'm',
          1,
          'no ready node has half its CPU threads free and 1024 MiB of RAM (node-a: 0 threads free, needs 4)',
        ),
      ],
    },
  ],
  [
    "a node's RAM is never reserved past its memory",
    input({
      nodes: [node('node-a', { cpus: 64, memory_mib: 10240 })],
      models: [model('m', 3, cpu({ min_memory_gb: 4 }))],
      cpuThreads: 4,
    }),
    {
      added: ['m-1@cpu node-a 0/1 [] :20000 t4 m4096', 'm-2@cpu node-a 0/1 [] :20001 t4 m4096'],
      pending: [
        pending(
          'm',
          1,
          'no ready node has 4 free CPU threads and 4096 MiB of RAM (node-a: 2048 MiB of RAM free)',
        ),
      ],
    },
  ],
  [
    'CPU replicas go on GPU nodes too: spread, then the fewest free threads',
    input({
      nodes: [node('node-a', { cpus: 16, devices: cards(4) }), node('node-b', { cpus: 8 })],
      models: [model('m', 3, cpu())],
      cpuThreads: 2,
    }),
    {
      added: [
        'm-1@cpu node-b 0/1 [] :20000 t2 m1024',
        'm-2@cpu node-a 0/1 [] :20000 t2 m1024',
        'm-3@cpu node-b 0/1 [] :20001 t2 m1024',
      ],
    },
  ],
  [
    'CPU: kept shards hold their threads and RAM',
    input({
      nodes: [node('node-a', { cpus: 6, memory_mib: 65536 })],
      models: [model('x', 1, cpu()), model('m', 1, cpu({ min_memory_gb: 8 }))],
      shards: [
        shard({
          replica: 'x-1',
          model: 'x',
          profile: 'cpu',
          node: 'node-a',
          port: 20000,
          threads: 4,
          memory_mib: 1024,
        }),
      ],
      cpuThreads: 4,
    }),
    {
      pending: [
        pending('m', 1, 'no ready node has 4 free CPU threads and 8192 MiB of RAM (node-a: 2 threads free)'),
      ],
    },
  ],
  [
    'CPU: nodes that report no CPUs, fewer CPUs than the setting, or are not ready',
    input({
      nodes: [
        node('node-a', { cpus: 0 }),
        node('node-b', { cpus: 2 }),
        node('node-c', { cpus: 64, ready: false }),
      ],
      models: [model('m', 1, cpu())],
      cpuThreads: 4,
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'no ready node has 4 free CPU threads and 1024 MiB of RAM (node-c: not ready, node-b: only 2 CPUs, node-a: no CPUs reported)',
        ),
      ],
    },
  ],

  // Ports.
  [
    'ports: kept ports and dist_ports on the node are skipped, those out of range ignored',
    input({
      nodes: [node('node-a', { devices: cards(3) })],
      models: [model('x', 1, gpu(A100)), model('y', 1, gpu(A100)), model('m', 1, gpu(A100))],
      shards: [
        shard({ replica: 'x-1', model: 'x', node: 'node-a', devices: [0], port: 20000, dist_port: 20001 }),
        shard({ replica: 'y-1', model: 'y', node: 'node-a', devices: [1], port: 8080 }),
      ],
    }),
    { added: ['m-1@main node-a 0/1 [2] :20002'] },
  ],
  [
    'ports: a port used on another node is free here',
    input({
      nodes: [node('node-a', { devices: cards(1) }), node('node-b', { devices: cards(1) })],
      models: [model('x', 1, gpu(A100)), model('m', 1, gpu(A100))],
      shards: [shard({ replica: 'x-1', model: 'x', node: 'node-a', devices: [0], port: 20000 })],
    }),
    { added: ['m-1@main node-b 0/1 [0] :20000'] },
  ],
  [
    'ports: when the range runs out the reason names it',
    input({
      nodes: [node('node-a', { devices: cards(4) })],
      models: [model('m', 3, gpu(A100))],
      ports: { first: 20000, last: 20001 },
    }),
    {
      added: ['m-1@main node-a 0/1 [0] :20000', 'm-2@main node-a 0/1 [1] :20001'],
      pending: [
        pending('m', 1, 'no ready node has a free a100-80g card (node-a: no free port in 20000-20001)'),
      ],
    },
  ],

  [
    'ports: those other programs listen on are never handed out',
    input({
      nodes: [
        node('node-a', {
          devices: cards(4),
          portsTaken: [
            [20000, 20000],
            [20002, 20003],
          ],
        }),
      ],
      models: [model('m', 3, gpu(A100))],
    }),
    {
      added: [
        'm-1@main node-a 0/1 [0] :20001',
        'm-2@main node-a 0/1 [1] :20004',
        'm-3@main node-a 0/1 [2] :20005',
      ],
    },
  ],
  [
    "ports: taken ones count only within the range, and with kept shards' ports once",
    input({
      nodes: [
        node('node-a', {
          devices: cards(4),
          portsTaken: [
            [19990, 20000],
            [20002, 20002],
            [20010, 20020],
          ],
        }),
      ],
      models: [model('x', 1, gpu(A100)), model('m', 3, gpu(A100))],
      shards: [shard({ replica: 'x-1', model: 'x', node: 'node-a', devices: [0], port: 20002 })],
      ports: { first: 20000, last: 20003 },
    }),
    {
      added: ['m-1@main node-a 0/1 [1] :20001', 'm-2@main node-a 0/1 [2] :20003'],
      pending: [
        pending('m', 1, 'no ready node has a free a100-80g card (node-a: no free port in 20000-20003)'),
      ],
    },
  ],
  [
    'ports: a port taken on one node is free on another',
    input({
      nodes: [
        node('node-a', { devices: cards(1), portsTaken: [[20000, 20000]] }),
        node('node-b', { devices: cards(1) }),
      ],
      models: [model('m', 2, gpu(A100))],
    }),
    { added: ['m-1@main node-a 0/1 [0] :20001', 'm-2@main node-b 0/1 [0] :20000'] },
  ],
  [
    'ports: a node whose range other programs hold all of takes nothing, and another does',
    input({
      nodes: [node('node-a', { cpus: 64, portsTaken: [[20000, 20001]] }), node('node-b', { cpus: 8 })],
      models: [model('c', 1, cpu())],
      ports: { first: 20000, last: 20001 },
    }),
    { added: ['c-1@cpu node-b 0/1 [] :20000 t4 m1024'] },
  ],
  [
    'ports: the head of a multi-node replica takes two ports other programs do not hold',
    input({
      nodes: [
        node('node-a', {
          devices: cards(1),
          portsTaken: [
            [20000, 20000],
            [20002, 20002],
          ],
        }),
        node('node-b', { devices: cards(1), portsTaken: [[20000, 20001]] }),
      ],
      models: [model('m', 1, gpu(A100, 1, 2))],
    }),
    { added: ['m-1@main node-a 0/2 [0] :20001 dist 20003', 'm-1@main node-b 1/2 [0] :20002'] },
  ],

  // Readiness.
  [
    'not-ready nodes get no new shards',
    input({
      nodes: [node('node-a', { devices: cards(1) }), node('node-b', { devices: cards(8), ready: false })],
      models: [model('m', 2, gpu(A100))],
    }),
    {
      added: ['m-1@main node-a 0/1 [0] :20000'],
      pending: [
        pending('m', 1, 'no ready node has a free a100-80g card (node-b: not ready, node-a: 1 of 1 in use)'),
      ],
    },
  ],
  [
    'no ready node at all',
    input({
      nodes: [node('node-d', { devices: cards(8), ready: false })],
      models: [model('m', 1, gpu(A100))],
    }),
    { pending: [pending('m', 1, 'no ready node (node-d: not ready)')] },
  ],
  [
    'no node at all',
    input({ models: [model('m', 2, gpu(A100))] }),
    { pending: [pending('m', 2, 'no ready node (no node has joined)')] },
  ],

  // Reasons.
  [
    'the reason of the issue: too few whole cards, and a node in MIG mode',
    input({
      nodes: [node('node-a', { devices: cards(2) }), node('node-b', { devices: [mig(0, 0), mig(0, 1)] })],
      models: [x1, model('m', 1, gpu(A100, 2))],
      shards: [shard({ replica: 'x-1', model: 'x', node: 'node-a', devices: [0], port: 20000 })],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'no ready node has 2 free a100-80g cards (node-a: 1 free, node-b: MIG mode, no whole cards)',
        ),
      ],
    },
  ],
  [
    'no node has the class: the reason lists the classes there are',
    input({
      nodes: [node('node-a', { devices: [card(0), mig(1, 0)] })],
      models: [model('m', 1, gpu('l4-24g'))],
    }),
    { pending: [pending('m', 1, 'no node has l4-24g cards (classes here: a100-80g, a100-80g-mig-3g.40gb)')] },
  ],
  [
    'no node has GPUs',
    input({ nodes: [node('node-a')], models: [model('m', 1, gpu('l4-24g'))] }),
    { pending: [pending('m', 1, 'no node has l4-24g cards (no node has GPUs)')] },
  ],
  [
    "an excluded card's reason, shortened, where it explains the shortfall",
    input({
      nodes: [
        node('node-a', {
          devices: cards(1),
          excluded: [
            {
              card: 1,
              uuid: 'GPU-1',
              class: A100,
              reason:
                'the driver reports uncorrectable ECC errors and failed row remapping on this card, so it needs service',
            },
          ],
        }),
        node('node-b', {
          excluded: [
            {
              card: 0,
              uuid: 'GPU-0',
              class: A100,
              // As discovery words it (gpu/devices.ts): the first clause is kept.
              reason:
                'MIG mode with no instances carved: create some (nvidia-smi mig -i 0 -cgi 9,9 -C) or turn MIG off (nvidia-smi -i 0 -mig 0)',
            },
          ],
        }),
      ],
      models: [model('m', 1, gpu(A100, 2))],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'no ready node has 2 free a100-80g cards (node-a: 1 free, 1 card excluded (the driver reports uncorrectable ECC errors and failed row…), node-b: 1 card excluded (MIG mode with no instances carved))',
        ),
      ],
    },
  ],
  [
    "several profiles: each profile's reason",
    input({
      nodes: [node('node-a', { cpus: 2, devices: cards(1) })],
      models: [model('m', 1, gpu('h100-80g', 1, 1, 'h100'), cpu())],
      cpuThreads: 4,
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'profile h100: no node has h100-80g cards (classes here: a100-80g); profile cpu: no ready node has 4 free CPU threads and 1024 MiB of RAM (node-a: only 2 CPUs)',
        ),
      ],
    },
  ],
  // Successors pinned to their predecessor's profile (a change of one profile rolls on it).
  [
    'a pinned successor takes its profile, not the first that fits',
    input({
      nodes: [node('node-a', { devices: cards(8) })],
      models: [model('m', 2, gpu(A100, 4, 1, 'a100'), cpu())],
      shards: [
        shard({
          replica: 'old',
          model: 'm',
          profile: 'a100',
          node: 'node-a',
          devices: [0, 1, 2, 3],
          port: 20000,
        }),
      ],
      pinned: new Map([['m', ['a100']]]),
    }),
    { added: ['m-1@a100 node-a 0/1 [4,5,6,7] :20001'] },
  ],
  [
    'a pinned successor with no room on its profile waits, naming it, and never takes the fallback',
    input({
      nodes: [node('node-a', { devices: cards(8) })],
      models: [model('m', 2, gpu(A100, 5, 1, 'a100'), cpu())],
      shards: [
        shard({
          replica: 'old',
          model: 'm',
          profile: 'a100',
          node: 'node-a',
          devices: [0, 1, 2, 3],
          port: 20000,
        }),
      ],
      pinned: new Map([['m', ['a100']]]),
    }),
    {
      pending: [
        {
          model: 'm',
          count: 1,
          profile: 'a100',
          reason:
            'profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (node-a: 4 free)',
        },
      ],
    },
  ],
  [
    'pins beyond what is missing are not placed; the rest of the missing take the first that fits',
    input({
      nodes: [node('node-a', { devices: cards(2) })],
      models: [model('m', 3, gpu(A100, 4, 1, 'a100'), cpu())],
      shards: [
        shard({
          replica: 'old',
          model: 'm',
          profile: 'cpu',
          node: 'node-a',
          port: 20000,
          threads: 1,
          memory_mib: 1024,
        }),
      ],
      pinned: new Map([['m', ['cpu']]]),
      cpuThreads: 1,
    }),
    { added: ['m-1@cpu node-a 0/1 [] :20001 t1 m1024', 'm-2@cpu node-a 0/1 [] :20002 t1 m1024'] },
  ],
  [
    'a pin to a profile the model no longer has waits, saying so',
    input({
      nodes: [node('node-a', { devices: cards(8) })],
      models: [model('m', 1, gpu(A100, 1, 1, 'a100'), cpu())],
      pinned: new Map([['m', ['gone']]]),
    }),
    {
      pending: [
        {
          model: 'm',
          count: 1,
          profile: 'gone',
          reason: 'profile gone, which the replicas it replaces ran: not in the model',
        },
      ],
    },
  ],
  [
    'a big cluster: nodes that say the same are one entry; five entries, the rest counted',
    input({
      nodes: [
        ...Array.from({ length: 7 }, (_, i) => node(`node-0${i + 1}`, { devices: cards(i + 1) })),
        ...Array.from({ length: 4 }, (_, i) =>
          node(`node-${String(i + 8).padStart(2, '0')}`, { devices: cards(8), ready: false }),
        ),
      ],
      models: [model('m', 1, gpu(A100, 8))],
    }),
    {
      pending: [
        pending(
          'm',
          1,
          'no ready node has 8 free a100-80g cards (node-08 and 3 more: not ready, node-07: 7 free, node-06: 6 free, node-05: 5 free, node-04: 4 free, and 3 more)',
        ),
      ],
    },
  ],
  [
    'a profile with neither gpu_class nor cpu',
    input({ nodes: [node('node-a', { devices: cards(1) })], models: [model('m', 1, profile({}))] }),
    {
      pending: [
        pending('m', 1, 'the profile names no gpu_class and is not cpu: true, so it has nowhere to run'),
      ],
    },
  ],

  // Kept shards, scale-down and removed models.
  [
    'kept shards stay, and their cards are not given again',
    input({
      nodes: [node('node-a', { devices: cards(2) })],
      models: [model('m', 2, gpu(A100))],
      shards: [shard({ replica: 'm-0', model: 'm', node: 'node-a', devices: [0], port: 20000 })],
    }),
    { added: ['m-1@main node-a 0/1 [1] :20001'] },
  ],
  [
    'scale-down stops the newest replicas: highest ids in natural order',
    input({
      nodes: [node('node-a', { devices: cards(4) })],
      models: [model('m', 1, gpu(A100))],
      shards: [
        shard({ replica: 'm-9', model: 'm', node: 'node-a', devices: [0], port: 20000 }),
        shard({ replica: 'm-10', model: 'm', node: 'node-a', devices: [1], port: 20001 }),
        shard({ replica: 'm-2', model: 'm', node: 'node-a', devices: [2], port: 20002 }),
      ],
    }),
    { removed: ['m-9 node-a 0/1', 'm-10 node-a 0/1'] },
  ],
  [
    'scale-down stops replicas on not-ready or unknown nodes first',
    input({
      nodes: [node('node-a', { devices: cards(2) }), node('node-b', { devices: cards(2), ready: false })],
      models: [model('m', 1, gpu(A100))],
      shards: [
        shard({ replica: 'm-1', model: 'm', node: 'node-b', devices: [0], port: 20000 }),
        shard({ replica: 'm-2', model: 'm', node: 'node-a', devices: [0], port: 20000 }),
        shard({ replica: 'm-3', model: 'm', node: 'node-gone', devices: [0], port: 20000 }),
      ],
    }),
    { removed: ['m-1 node-b 0/1', 'm-3 node-gone 0/1'] },
  ],
  [
    'a replica stopped on scale-down goes with all its ranks',
    input({
      nodes: [node('node-a', { devices: cards(8) }), node('node-b', { devices: cards(8) })],
      models: [model('m', 1, gpu(A100, 4, 2))],
      shards: [
        shard({
          replica: 'r-1',
          model: 'm',
          rank: 0,
          ranks: 2,
          node: 'node-a',
          devices: [0, 1, 2, 3],
          port: 20000,
          dist_port: 20001,
        }),
        shard({
          replica: 'r-1',
          model: 'm',
          rank: 1,
          ranks: 2,
          node: 'node-b',
          devices: [0, 1, 2, 3],
          port: 20000,
        }),
        shard({
          replica: 'r-2',
          model: 'm',
          rank: 0,
          ranks: 2,
          node: 'node-b',
          devices: [4, 5, 6, 7],
          port: 20001,
          dist_port: 20002,
        }),
        shard({
          replica: 'r-2',
          model: 'm',
          rank: 1,
          ranks: 2,
          node: 'node-a',
          devices: [4, 5, 6, 7],
          port: 20002,
        }),
      ],
    }),
    { removed: ['r-2 node-b 0/2', 'r-2 node-a 1/2'] },
  ],
  [
    'a model that is gone takes its shards; they hold their cards until the next pass',
    input({
      nodes: [node('node-a', { devices: cards(1) })],
      models: [model('m', 1, gpu(A100))],
      shards: [shard({ replica: 'gone-1', model: 'gone', node: 'node-a', devices: [0], port: 20000 })],
    }),
    {
      removed: ['gone-1 node-a 0/1'],
      pending: [pending('m', 1, 'no ready node has a free a100-80g card (node-a: 1 of 1 in use)')],
    },
  ],
  [
    'replicas: 0 stops every replica',
    input({
      nodes: [node('node-a', { cpus: 8 })],
      models: [model('m', 0, cpu())],
      shards: [
        shard({
          replica: 'm-1',
          model: 'm',
          profile: 'cpu',
          node: 'node-a',
          port: 20000,
          threads: 4,
          memory_mib: 1024,
        }),
      ],
    }),
    { removed: ['m-1 node-a 0/1'] },
  ],
  [
    'shards on a node no longer known are kept and count as replicas',
    input({
      nodes: [node('node-a', { devices: cards(1) })],
      models: [model('m', 1, gpu(A100))],
      shards: [shard({ replica: 'm-1', model: 'm', node: 'node-z', devices: [0], port: 20000 })],
    }),
    {},
  ],
  [
    'a model named twice: the first counts',
    input({
      nodes: [node('node-a', { devices: cards(2) })],
      models: [model('m', 1, gpu(A100)), model('m', 2, gpu(A100))],
    }),
    { added: ['m-1@main node-a 0/1 [0] :20000'] },
  ],
];

describe('place', () => {
  it.each(cases)('%s', (_what, inp, expected) => {
    const r = place(inp);
    const given = new Set(inp.shards);
    // Kept shards are the input's own, unchanged and in input order; removed ones likewise.
    const kept = r.shards.filter((s) => given.has(s));
    expect(kept).toEqual(inp.shards.filter((s) => !r.remove.includes(s)));
    expect(r.remove.every((s) => given.has(s))).toBe(true);
    expect(r.shards.filter((s) => !given.has(s)).map(brief)).toEqual(expected.added ?? []);
    expect(r.remove.map((s) => `${s.replica} ${s.node} ${s.rank}/${s.ranks}`)).toEqual(
      expected.removed ?? [],
    );
    expect(r.pending).toEqual(expected.pending ?? []);
  });

  it('asks for a replica id once per replica added, never for one it could not place', () => {
    const ids: string[] = [];
    const inp: PlacementInput = {
      ...input({
        nodes: [node('node-a', { devices: cards(3) })],
        models: [model('m', 2, gpu(A100)), model('big', 1, gpu(A100, 8))],
      }),
      newReplicaId: (m) => {
        ids.push(m);
        return `${m}-${ids.length}`;
      },
    };
    place(inp);
    expect(ids).toEqual(['m', 'm']);
  });

  it('gives the same result for the same input, whatever the order of the nodes', () => {
    const nodes = ['node-d', 'node-b', 'node-a', 'node-c'].map((n, i) =>
      node(n, { devices: cards(i + 1), cpus: 4 * (i + 1) }),
    );
    const models = [model('m', 5, gpu(A100)), model('c', 3, cpu())];
    const one = place(input({ nodes, models }));
    const two = place(input({ nodes: [...nodes].reverse(), models }));
    expect(two).toEqual(one);
    expect(place(input({ nodes, models }))).toEqual(one);
  });
});
