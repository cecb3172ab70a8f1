import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { engines } from '../../test/support/engines.js';
import { configs, llama31_8b } from '../../test/fakes/gguf/models.js';
import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import type { Device } from '../gpu/types.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { shapeFromGguf } from '../models/gguf-shape.js';
import { known, type ModelShape } from '../models/shape.js';
import { GIB, MIB, planProfile } from '../planner/index.js';

import { ProfileFit } from './fit.js';
import { place } from './place.js';
import type { ModelMemory, PlacementInput, PlacementNode, Shard } from './types.js';
import { cpuProfile } from '../../test/support/profiles.js';

/** Llama-3.1-8B's original weights (bf16, 14.96 GiB; 128 KiB of KV a token). */
const llama8b = shapeFromConfig({
  config: configs.llama31_8b.json,
  weightBytes: configs.llama31_8b.weightBytes,
});
/** The same as a Q4_K_M GGUF of 4.58 GiB. */
const llamaGguf: ModelShape = {
  ...shapeFromGguf({ metadata: asMetadata(llama31_8b) }),
  weightBytes: known(4.58 * GIB),
};

/** nvidia-smi's memory.total of each (class-memory.ts). */
const MIB_OF: Record<string, number> = {
  'l4-24g': 23034,
  'a100-80g': 81920,
  'a100-80g-mig-1g.10gb': 9984,
  'a100-80g-mig-3g.40gb': 40448,
  'h100-80g': 81559,
};

function device(id: number, cls: string, mib = MIB_OF[cls] ?? 0): Device {
  const m = /^(.*)-mig-(.*)$/.exec(cls);
  return {
    id,
    label: `${id}`,
    class: cls,
    card: m === null ? id : 0,
    uuid: `GPU-${id}`,
    ...(m === null
      ? {}
      : { mig: { profile: m[2] ?? '', instance: id, gpu_instance_id: id + 1, compute_instance_id: 0 } }),
    memory_total_mib: mib,
    memory_used_mib: 0,
    wear: {},
    processes: [],
  };
}

function node(name: string, devices: Device[], memory_mib = 262144): PlacementNode {
  return { name, ready: true, devices, excluded: [], cpus: 32, memory_mib, address: '10.0.0.1' };
}

function gpu(cls: string, tp = 1, more: Partial<ProfileSpec> = {}): ProfileSpec {
  return {
    name: 'main',
    engine: 'vllm',
    gpu_class: cls,
    tp,
    pp: 1,
    gpus_per_node: tp,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    ...more,
  };
}

const cpu = cpuProfile();

function model(name: string, o: { replicas?: number; context?: number; profiles: ProfileSpec[] }): ModelSpec {
  return {
    name,
    source: `hf://org/${name}`,
    replicas: o.replicas ?? 1,
    profiles: o.profiles,
    ...(o.context === undefined ? {} : { context_length: o.context }),
  };
}

function input(
  models: ModelSpec[],
  nodes: PlacementNode[],
  memory: Record<string, ModelShape>,
  shards: Shard[] = [],
): PlacementInput {
  let n = 0;
  return {
    models,
    nodes,
    shards,
    ports: { first: 20000, last: 20009 },
    cpuThreads: 4,
    newReplicaId: (m) => `${m}-${++n}`,
    memory: new Map<string, ModelMemory>(Object.entries(memory).map(([k, shape]) => [k, { shape }])),
  };
}

const where = (shards: readonly Shard[]) =>
  shards.map(
    (s) => `${s.node}[${s.devices.join(',')}]${s.memory_mib === undefined ? '' : ` ${s.memory_mib} MiB`}`,
  );

const busyA: Shard = {
  replica: 'x-1',
  model: 'x',
  profile: 'main',
  rank: 0,
  ranks: 1,
  node: 'a',
  devices: [0],
  port: 20000,
};

describe('placement with the memory planner: a profile goes only where a replica fits', () => {
  const cases: [string, PlacementInput, string[], string | undefined][] = [
    [
      'cards that hold it',
      input(
        [model('m', { context: 131072, profiles: [gpu('a100-80g')] })],
        [node('a', [device(0, 'a100-80g')])],
        { m: llama8b },
      ),
      ['a[0]'],
      undefined,
    ],
    [
      "cards too small on every node: the planner's reason, and the class of the cluster where it fits",
      input(
        [model('m', { context: 131072, profiles: [gpu('l4-24g')] })],
        [node('a', [device(0, 'l4-24g')]), node('b', [device(0, 'a100-80g')])],
        { m: llama8b },
      ),
      [],
      "needs 32.7 GiB a card on l4-24g (weights 15.0, KV 16.0 at 131072 tokens, overhead 1.7), the card gives 20.7 (vLLM's 0.92 of 22.5): a context up to 33024 fits, or 2 cards, or a100-80g",
    ],
    [
      'a small card passed over for one that holds it, however many are free',
      input(
        [model('m', { context: 131072, profiles: [gpu('a100-80g')] })],
        [node('a', cardsOf(4, 'a100-80g', 20000)), node('b', [device(0, 'a100-80g')])],
        { m: llama8b },
      ),
      ['b[0]'],
      undefined,
    ],
    [
      'some nodes too small, others busy: each says which',
      input(
        [model('m', { context: 131072, profiles: [gpu('a100-80g')] })],
        [node('a', [device(0, 'a100-80g')]), node('b', [device(0, 'a100-80g', 20000)])],
        { m: llama8b },
        [busyA],
      ),
      [],
      'no ready node has a free a100-80g card (a: 1 of 1 in use, b: cards too small (needs 32.7 GiB a card, gives 18.0))',
    ],
    [
      'a shorter context fits the same card',
      input([model('m', { context: 32768, profiles: [gpu('l4-24g')] })], [node('a', [device(0, 'l4-24g')])], {
        m: llama8b,
      }),
      ['a[0]'],
      undefined,
    ],
    [
      "tensor parallel that does not split the heads, in vLLM's words",
      input(
        [model('m', { context: 8192, profiles: [gpu('a100-80g', 3)] })],
        [node('a', cardsOf(4, 'a100-80g'))],
        { m: llama8b },
      ),
      [],
      'Total number of attention heads (32) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4, 8, 16.',
    ],
    [
      'a MIG instance too small, and the instances of the cluster that hold it',
      input(
        [model('m', { context: 32768, profiles: [gpu('a100-80g-mig-1g.10gb')] })],
        [node('a', [device(0, 'a100-80g-mig-1g.10gb'), device(1, 'a100-80g-mig-3g.40gb')])],
        { m: llama8b },
      ),
      [],
      "needs 20.7 GiB a card on a100-80g-mig-1g.10gb (weights 15.0, KV 4.0 at 32768 tokens, overhead 1.7), the card gives 9.0 (vLLM's 0.92 of 9.8): no context fits beside the weights: a larger MIG profile such as a100-80g-mig-3g.40gb or a100-80g-mig-4g.40gb, or a whole a100-80g card",
    ],
    [
      'a MIG instance too small: the classes of the cluster the planner did not name come after',
      input(
        [model('m', { context: 32768, profiles: [gpu('a100-80g-mig-1g.10gb')] })],
        [node('a', [device(0, 'a100-80g-mig-1g.10gb'), device(1, 'h100-80g')])],
        { m: llama8b },
      ),
      [],
      "needs 20.7 GiB a card on a100-80g-mig-1g.10gb (weights 15.0, KV 4.0 at 32768 tokens, overhead 1.7), the card gives 9.0 (vLLM's 0.92 of 9.8): no context fits beside the weights: a larger MIG profile such as a100-80g-mig-3g.40gb or a100-80g-mig-4g.40gb, or a whole a100-80g card, or h100-80g",
    ],
    [
      'a MIG instance that holds it',
      input(
        [model('m', { context: 32768, profiles: [gpu('a100-80g-mig-3g.40gb')] })],
        [node('a', [device(0, 'a100-80g-mig-1g.10gb'), device(1, 'a100-80g-mig-3g.40gb')])],
        { m: llama8b },
      ),
      ['a[1]'],
      undefined,
    ],
    [
      "CPUs: the planner's RAM is reserved, and the second replica finds too little free",
      input([model('m', { context: 8192, replicas: 2, profiles: [cpu] })], [node('a', [], 16384)], {
        m: llamaGguf,
      }),
      ['a[] 9960 MiB'],
      'no ready node has 4 free CPU threads and 9960 MiB of RAM (a: 6424 MiB of RAM free)',
    ],
    [
      "CPUs: min_memory_gb wins when larger than the planner's count",
      input(
        [model('m', { context: 8192, profiles: [{ ...cpu, min_memory_gb: 12 }] })],
        [node('a', [], 16384)],
        { m: llamaGguf },
      ),
      ['a[] 12288 MiB'],
      undefined,
    ],
    [
      "CPUs: more than any node's RAM, the planner's reason",
      input([model('m', { context: 131072, profiles: [cpu] })], [node('a', [], 16384)], { m: llamaGguf }),
      [],
      'needs 70.2 GiB of RAM (weights 4.6, KV 64.0 at 524288 tokens (4 slots of 131072), overhead 1.6), the node has 16.0: a context up to 20736 fits with 4 slots',
    ],
    [
      'a model whose shape is not known: placed by its cards alone, as before',
      input(
        [model('m', { context: 131072, profiles: [gpu('l4-24g')] }), model('c', { profiles: [cpu] })],
        [node('a', [device(0, 'l4-24g')], 16384)],
        {},
      ),
      ['a[0]', 'a[] 1024 MiB'],
      undefined,
    ],
    [
      'the first profile too small everywhere, the second fits',
      input(
        [
          model('m', {
            context: 131072,
            replicas: 2,
            profiles: [gpu('l4-24g'), { ...gpu('a100-80g'), name: 'big' }],
          }),
        ],
        [node('a', cardsOf(2, 'l4-24g')), node('b', cardsOf(2, 'a100-80g'))],
        { m: llama8b },
      ),
      ['b[0]', 'b[1]'],
      undefined,
    ],
  ];
  it.each(cases)('%s', (_name, i, added, reason) => {
    const r = place(i);
    expect(where(r.added)).toEqual(added);
    expect(r.pending.map((p) => p.reason)).toEqual(reason === undefined ? [] : [reason]);
  });

  it('answers as a fresh plan for each node would: memoizing by memory changes nothing', () => {
    // 24 nodes of one class whose cards report 6 sizes; a replica fits from 40000 MiB on.
    const sizes = [20000, 30000, 34000, 40000, 60000, 81920];
    const nodes = Array.from({ length: 24 }, (_, i) =>
      node(`n${String(i).padStart(2, '0')}`, [device(0, 'a100-80g', sizes[i % sizes.length])]),
    );
    const m = model('m', { context: 131072, replicas: 24, profiles: [gpu('a100-80g')] });
    const r = place(input([m], nodes, { m: llama8b }));
    const fresh = nodes
      .filter(
        (n) =>
          planProfile({
            engines,
            shape: llama8b,
            profile: m.profiles[0] as ProfileSpec,
            device: { class: 'a100-80g', memoryBytes: (n.devices[0]?.memory_total_mib ?? 0) * MIB },
            context: 131072,
          }).fits,
      )
      .map((n) => n.name);
    expect(r.added.map((s) => s.node).sort()).toEqual(fresh);
    expect(fresh).toHaveLength(12);
    expect(r.pending).toEqual([
      { model: 'm', count: 12, reason: expect.stringContaining('cards too small') as string },
    ]);
    // The same input again, new memo: the same answer.
    expect(place(input([m], nodes, { m: llama8b }))).toEqual(r);
  });

  it('asks the planner once per class and memory, not once per node', () => {
    const fit = new ProfileFit({
      model: 'm',
      memory: { shape: llama8b },
      profile: gpu('a100-80g'),
      context: 131072,
    });
    expect(fit.plan(81920)).toBe(fit.plan(81920));
    expect(fit.fits(20000)).toBe(false);
    expect(fit.fits(81920)).toBe(true);
  });
});

function cardsOf(n: number, cls: string, mib?: number): Device[] {
  return Array.from({ length: n }, (_, i) => device(i, cls, mib));
}
