import { describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../../../catalog/model-spec.js';
import type { Device } from '../../../gpu/types.js';
import type { Shard } from '../../../placement/types.js';

import {
  planFleet,
  runsAsSpecified,
  successorProfiles,
  type FleetPlan,
  type FleetPlanInput,
  type PlanNode,
  type PlanReplica,
  type PlanRollout,
} from './fleet-plan.js';

const A100 = 'a100-80g';
const now = Date.parse('2026-03-01T12:00:00.000Z');
const minute = 60_000;

function cards(n: number): Device[] {
  return Array.from({ length: n }, (_, id) => ({
    id,
    label: `${id}`,
    class: A100,
    card: id,
    uuid: `GPU-${id}`,
    memory_total_mib: 81920,
    memory_used_mib: 0,
    wear: {},
    processes: [],
  }));
}

function node(name: string, o: { cards?: number; ready?: boolean; lastSeen?: number } = {}): PlanNode {
  return {
    node: {
      name,
      ready: o.ready ?? true,
      devices: cards(o.cards ?? 2),
      excluded: [],
      cpus: 32,
      memory_mib: 262144,
      address: '10.0.0.1',
    },
    lastSeen: o.lastSeen ?? now,
  };
}

function gpu(p: Partial<ProfileSpec> = {}): ProfileSpec {
  return {
    name: 'main',
    engine: 'vllm',
    gpu_class: A100,
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

function model(name: string, replicas: number, o: Partial<ModelSpec> = {}): ModelSpec {
  return { name, source: `/models/${name}`, replicas, profiles: [gpu()], ...o };
}

interface Running {
  replica: PlanReplica;
  shard: Shard;
}

/** A replica placed before, on one card: `minutesAgo` orders replicas by age. */
function running(
  id: string,
  spec: ModelSpec,
  o: { node?: string; card: number; port: number; minutesAgo?: number; retiring?: string; profile?: string },
): Running {
  const profile = o.profile ?? 'main';
  return {
    replica: {
      id,
      model: spec.name,
      profile,
      created_at: new Date(now - (o.minutesAgo ?? 10) * minute).toISOString(),
      spec,
      retiring: o.retiring !== undefined,
      retire_reason: o.retiring ?? null,
      // Marked two minutes ago: replicas made since stand in for it.
      retiring_since: o.retiring === undefined ? null : new Date(now - 2 * minute).toISOString(),
    },
    shard: {
      replica: id,
      model: spec.name,
      profile,
      rank: 0,
      ranks: 1,
      node: o.node ?? 'node-a',
      devices: [o.card],
      port: o.port,
    },
  };
}

function input(o: {
  specs: ModelSpec[];
  running?: Running[];
  nodes?: PlanNode[];
  ready?: string[];
  upSince?: number;
  lostAfterS?: number;
}): FleetPlanInput {
  const list = o.running ?? [];
  return {
    specs: o.specs,
    replicas: list.map((r) => r.replica),
    shards: list.map((r) => r.shard),
    nodes: o.nodes ?? [node('node-a')],
    ready: new Set(o.ready ?? list.map((r) => r.replica.id)),
    now,
    upSince: o.upSince ?? now - 24 * 60 * minute,
    lostAfterS: o.lostAfterS ?? 60,
    reconnectS: 30,
    ports: { first: 20000, last: 20009 },
    cpuThreads: 0,
  };
}

interface Expected {
  retire?: string[];
  remove?: string[];
  add?: string[];
  pending?: string[];
}

/** One line per change, so a row reads as what happens. */
function brief(plan: FleetPlan): Expected {
  const out: Expected = {};
  if (plan.retire.length > 0) out.retire = plan.retire.map((c) => `${c.id}: ${c.reason}`);
  if (plan.remove.length > 0) out.remove = plan.remove.map((c) => `${c.id}: ${c.reason}`);
  if (plan.add.length > 0)
    out.add = plan.add.map(
      (a) =>
        `${a.model}@${a.profile} ${a.shards.map((s) => `${s.node} [${s.devices.join(',')}] :${s.port}`).join(' ')}`,
    );
  if (plan.pending.length > 0) out.pending = plan.pending.map((p) => `${p.model} ×${p.count}: ${p.reason}`);
  return out;
}

const m1 = model('m', 1);
const m2 = model('m', 2);
const changed = (spec: ModelSpec) => ({ ...spec, profiles: [gpu({ args: ['--max-num-seqs', '8'] })] });

const cases: [string, FleetPlanInput, Expected][] = [
  [
    'nothing to do: what runs is what the catalog wants',
    input({ specs: [m1], running: [running('m-1', m1, { card: 0, port: 20000 })] }),
    {},
  ],
  [
    'scaled up 1 → 2: the running replica stays, one is added beside it',
    input({ specs: [m2], running: [running('m-1', m1, { card: 0, port: 20000 })] }),
    { add: ['m@main node-a [1] :20001'] },
  ],
  [
    'scaled down 2 → 1: the newest goes, the other is untouched',
    input({
      specs: [m1],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
        running('m-2', m2, { card: 1, port: 20001 }),
      ],
    }),
    { remove: ['m-2: scaled down'] },
  ],
  [
    'scaled down: one that is not ready goes before a ready one',
    input({
      specs: [m1],
      running: [running('m-1', m2, { card: 0, port: 20000 }), running('m-2', m2, { card: 1, port: 20001 })],
      ready: ['m-2'],
    }),
    { remove: ['m-1: scaled down'] },
  ],
  [
    'scaled down: one on a node that is not ready goes first',
    input({
      specs: [m1],
      running: [
        running('m-1', m2, { card: 0, port: 20000 }),
        running('m-2', m2, { node: 'node-b', card: 0, port: 20000 }),
      ],
      nodes: [node('node-a', { ready: false }), node('node-b')],
      ready: [],
    }),
    { remove: ['m-1: scaled down'] },
  ],
  [
    'scaled down: one of an older spec goes before one of the current spec',
    input({
      specs: [changed(m1)],
      running: [
        running('m-1', changed(m2), { card: 0, port: 20000, minutesAgo: 20 }),
        running('m-2', m2, { card: 1, port: 20001 }),
      ],
    }),
    { remove: ['m-2: scaled down'] },
  ],
  [
    'scaled to 0: every replica goes',
    input({
      specs: [model('m', 0)],
      running: [running('m-1', m2, { card: 0, port: 20000 }), running('m-2', m2, { card: 1, port: 20001 })],
    }),
    { remove: ['m-2: scaled down', 'm-1: scaled down'] },
  ],
  [
    'scaled up with no room: the running replica is untouched, one waits with the reason',
    input({
      specs: [m2],
      running: [running('m-1', m1, { card: 0, port: 20000 })],
      nodes: [node('node-a', { cards: 1 })],
    }),
    { pending: ['m ×1: no ready node has a free a100-80g card (node-a: 1 of 1 in use)'] },
  ],
  [
    'a model whose engine would start differently rolls: one replica is replaced, its successor placed beside it',
    input({
      specs: [changed(m2)],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
        running('m-2', m2, { card: 1, port: 20001 }),
      ],
      nodes: [node('node-a', { cards: 3 })],
    }),
    { retire: ['m-1: the model changed'], add: ['m@main node-a [2] :20002'] },
  ],
  [
    'while a replica of the model is being replaced, no other one is',
    input({
      specs: [changed(m2)],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20, retiring: 'the model changed' }),
        running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
        running('m-3', changed(m2), { card: 2, port: 20002, minutesAgo: 1 }),
      ],
      nodes: [node('node-a', { cards: 3 })],
      ready: ['m-1', 'm-2'],
    }),
    {},
  ],
  [
    'a replaced replica stops once its successor is ready, and the next one rolls',
    input({
      specs: [changed(m2)],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20, retiring: 'the model changed' }),
        running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
        running('m-3', changed(m2), { card: 2, port: 20002, minutesAgo: 1 }),
      ],
      nodes: [node('node-a', { cards: 4 })],
    }),
    // m-1's card and port are still held while its engine stops.
    {
      remove: ['m-1: the model changed'],
      retire: ['m-2: the model changed'],
      add: ['m@main node-a [3] :20003'],
    },
  ],
  [
    'a change to the replica count or to another profile replaces nothing',
    input({
      specs: [
        model('m', 1, { profiles: [gpu({ name: 'big', gpus_per_node: 2, tp: 2, args: ['--new'] }), gpu()] }),
      ],
      running: [
        running('m-1', model('m', 3, { profiles: [gpu({ name: 'big', gpus_per_node: 2, tp: 2 }), gpu()] }), {
          card: 0,
          port: 20000,
        }),
      ],
    }),
    {},
  ],
  [
    'a restarted replica gets a successor beside it, and waits for it',
    input({
      specs: [m1],
      running: [running('m-1', m1, { card: 0, port: 20000, retiring: 'restarted by admin' })],
    }),
    { add: ['m@main node-a [1] :20001'] },
  ],
  [
    'a restarted replica stops once its successor is ready',
    input({
      specs: [m1],
      running: [
        running('m-1', m1, { card: 0, port: 20000, minutesAgo: 5, retiring: 'restarted by admin' }),
        running('m-2', m1, { card: 1, port: 20001, minutesAgo: 1 }),
      ],
    }),
    { remove: ['m-1: restarted by admin'] },
  ],
  [
    'a restarted replica is not stood in for by a ready one that ran beside it before',
    input({
      specs: [m2],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20, retiring: 'restarted by admin' }),
        running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
      ],
      nodes: [node('node-a', { cards: 3 })],
    }),
    { add: ['m@main node-a [2] :20002'] },
  ],
  [
    'a restarted replica whose successor is not ready yet keeps serving',
    input({
      specs: [m1],
      running: [
        running('m-1', m1, { card: 0, port: 20000, minutesAgo: 5, retiring: 'restarted by admin' }),
        running('m-2', m1, { card: 1, port: 20001, minutesAgo: 1 }),
      ],
      ready: ['m-1'],
    }),
    {},
  ],
  [
    'scaled down during a restart: the new one that is not ready goes, then the restarted one, as enough are ready',
    input({
      specs: [m1],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20, retiring: 'restarted by admin' }),
        running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
        running('m-3', m2, { node: 'node-b', card: 0, port: 20000, minutesAgo: 1 }),
      ],
      nodes: [node('node-a'), node('node-b')],
      ready: ['m-1', 'm-2'],
    }),
    { remove: ['m-3: scaled down', 'm-1: restarted by admin'] },
  ],
  [
    'a model named with -new- in it gets its second replica on a port of its own',
    input({
      specs: [model('my-new-model', 3)],
      running: [running('my-new-model-1', model('my-new-model', 1), { card: 0, port: 20000 })],
      nodes: [node('node-a', { cards: 3 })],
    }),
    { add: ['my-new-model@main node-a [1] :20001', 'my-new-model@main node-a [2] :20002'] },
  ],
  [
    'a model removed from the catalog: its replicas go',
    input({ specs: [], running: [running('m-1', m1, { card: 0, port: 20000 })] }),
    { remove: ['m-1: model removed'] },
  ],
  [
    'a replica whose engine key cannot be opened is replaced',
    {
      ...input({ specs: [m1], running: [running('m-1', m1, { card: 0, port: 20000 })] }),
      unkeyed: new Set(['m-1']),
    },
    {
      remove: ["m-1: its engine key cannot be opened with this control plane's secret"],
      add: ['m@main node-a [1] :20001'],
    },
  ],
  [
    'a replica whose port another program holds is placed again on a free port; the others stay',
    {
      ...input({
        specs: [model('m', 2)],
        running: [running('m-1', m1, { card: 0, port: 20000 }), running('m-2', m1, { card: 1, port: 20001 })],
        nodes: [node('node-a', { cards: 3 })],
      }),
      portTaken: new Map([
        ['m-1', 'port 20000 on node node-a is taken by another program: placed again on a free port'],
      ]),
    },
    {
      remove: ['m-1: port 20000 on node node-a is taken by another program: placed again on a free port'],
      add: ['m@main node-a [2] :20002'],
    },
  ],
  [
    'a node removed: its replicas go, and are placed again elsewhere',
    input({ specs: [m1], running: [running('m-1', m1, { node: 'node-gone', card: 0, port: 20000 })] }),
    { remove: ['m-1: node node-gone was removed'], add: ['m@main node-a [0] :20000'] },
  ],
  [
    'a node silent past the grace while this control plane was up: its replicas are placed elsewhere',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 61_000 })],
      ready: [],
    }),
    { remove: ['m-1: node node-b was not ready for 60 s'], add: ['m@main node-a [0] :20000'] },
  ],
  [
    'a node not ready for less than the grace: kept',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 30_000 })],
      ready: [],
    }),
    {},
  ],
  [
    'a node last heard from an hour ago, by a control plane that started 10 s ago: kept, as it could not hear it',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 60 * minute })],
      ready: [],
      upSince: now - 10_000,
    }),
    {},
  ],
  [
    'a node last heard from before this control plane started, silent for the whole grace since: lost',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 60 * minute })],
      ready: [],
      upSince: now - 61_000,
    }),
    { remove: ['m-1: node node-b was not ready for 60 s'], add: ['m@main node-a [0] :20000'] },
  ],
  [
    'a short grace, a control plane up for less than an agent takes to reconnect: kept',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 60 * minute })],
      ready: [],
      upSince: now - 20_000,
      lostAfterS: 5,
    }),
    {},
  ],
  [
    'a short grace, a node not heard from in the reconnect time since the control plane started: lost',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 60 * minute })],
      ready: [],
      upSince: now - 31_000,
      lostAfterS: 5,
    }),
    { remove: ['m-1: node node-b was not ready for 30 s'], add: ['m@main node-a [0] :20000'] },
  ],
  [
    'a short grace, a node heard since the control plane started and silent past the grace: lost',
    input({
      specs: [m1],
      running: [running('m-1', m1, { node: 'node-b', card: 0, port: 20000 })],
      nodes: [node('node-a'), node('node-b', { ready: false, lastSeen: now - 6_000 })],
      ready: [],
      upSince: now - 20_000,
      lostAfterS: 5,
    }),
    { remove: ['m-1: node node-b was not ready for 5 s'], add: ['m@main node-a [0] :20000'] },
  ],
  [
    'replicas going still hold their cards and ports in this pass',
    input({
      specs: [m1, model('n', 1)],
      running: [
        running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
        running('m-2', m2, { card: 1, port: 20001 }),
      ],
      nodes: [node('node-a', { cards: 3 })],
    }),
    { remove: ['m-2: scaled down'], add: ['n@main node-a [2] :20002'] },
  ],
];

const next2 = changed(m2);
const rolling = (mode: PlanRollout['mode'], state: PlanRollout['state'] = 'rolling', spec = next2) =>
  new Map<string, PlanRollout>([['m', { mode, state, spec }]]);

/** Rolling changes: in place one at a time, surge as without a rollout, and a failed one halted. */
const rolls: [string, FleetPlanInput, Expected][] = [
  [
    'in place: the oldest replica of the old spec stops first; its successor waits for its card',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
          running('m-2', m2, { card: 1, port: 20001 }),
        ],
      }),
      rollouts: rolling('in-place'),
    },
    {
      remove: ['m-1: the model changed (in place)'],
      pending: ['m ×1: no ready node has a free a100-80g card (node-a: 2 of 2 in use)'],
    },
  ],
  [
    'in place: the successor is placed where the old one was, and the next old one waits for it',
    {
      ...input({
        specs: [next2],
        running: [running('m-2', m2, { card: 1, port: 20001 })],
      }),
      rollouts: rolling('in-place'),
    },
    { add: ['m@main node-a [0] :20000'] },
  ],
  [
    'in place: while the successor starts, no other replica stops',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-2', m2, { card: 1, port: 20001, minutesAgo: 20 }),
          running('m-3', next2, { card: 0, port: 20000, minutesAgo: 1 }),
        ],
        ready: ['m-2'],
      }),
      rollouts: rolling('in-place'),
    },
    {},
  ],
  [
    'in place: once the successor is ready, the next old replica stops',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-2', m2, { card: 1, port: 20001, minutesAgo: 20 }),
          running('m-3', next2, { card: 0, port: 20000, minutesAgo: 1 }),
        ],
      }),
      rollouts: rolling('in-place'),
    },
    {
      remove: ['m-2: the model changed (in place)'],
      pending: ['m ×1: no ready node has a free a100-80g card (node-a: 2 of 2 in use)'],
    },
  ],
  [
    'in place: an old replica that does not serve goes first, though another is older',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
          running('m-2', m2, { card: 1, port: 20001 }),
        ],
        ready: ['m-1'],
      }),
      rollouts: rolling('in-place'),
    },
    {
      remove: ['m-2: the model changed (in place)'],
      pending: ['m ×1: no ready node has a free a100-80g card (node-a: 2 of 2 in use)'],
    },
  ],
  [
    'in place: a model already short of a ready replica stops no serving one',
    {
      ...input({
        specs: [model('m', 3, { profiles: next2.profiles })],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
          running('m-2', m2, { card: 1, port: 20001 }),
        ],
      }),
      rollouts: rolling('in-place'),
    },
    { pending: ['m ×1: no ready node has a free a100-80g card (node-a: 2 of 2 in use)'] },
  ],
  [
    'surge rollout: as without one, one replica marked and its successor beside it',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
          running('m-2', m2, { card: 1, port: 20001 }),
        ],
        nodes: [node('node-a', { cards: 3 })],
      }),
      rollouts: rolling('surge'),
    },
    { retire: ['m-1: the model changed'], add: ['m@main node-a [2] :20002'] },
  ],
  [
    'failed surge rollout: the replaced one keeps serving beside its failed successor; no other is marked',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20, retiring: 'the model changed' }),
          running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
          running('m-3', next2, { card: 2, port: 20002, minutesAgo: 1 }),
        ],
        nodes: [node('node-a', { cards: 3 })],
        ready: ['m-1', 'm-2'],
      }),
      rollouts: rolling('surge', 'failed'),
    },
    {},
  ],
  [
    'failed surge rollout: once the one being replaced is gone, no other old one is marked',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
          running('m-3', next2, { card: 2, port: 20002, minutesAgo: 1 }),
        ],
        nodes: [node('node-a', { cards: 3 })],
      }),
      rollouts: rolling('surge', 'failed'),
    },
    {},
  ],
  [
    'failed in-place rollout: the old replica left keeps serving beside the failed successor',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-2', m2, { card: 1, port: 20001, minutesAgo: 20 }),
          running('m-3', next2, { card: 0, port: 20000, minutesAgo: 1 }),
        ],
        ready: ['m-2'],
      }),
      rollouts: rolling('in-place', 'failed'),
    },
    {},
  ],
  [
    'a later change after a failed one: the failed successor goes, and one of the later change is placed beside the replaced one',
    {
      ...input({
        specs: [model('m', 2, { context_length: 9 })],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20, retiring: 'the model changed' }),
          running('m-2', m2, { card: 1, port: 20001, minutesAgo: 15 }),
          running('m-3', next2, { card: 2, port: 20002, minutesAgo: 1 }),
        ],
        nodes: [node('node-a', { cards: 4 })],
        ready: ['m-1', 'm-2'],
      }),
      rollouts: rolling('surge', 'rolling', model('m', 2, { context_length: 9 })),
    },
    {
      remove: ['m-3: the model changed again before it was ready'],
      add: ['m@main node-a [3] :20003'],
    },
  ],
  [
    'a rollout of an earlier change (the model changed again since) halts nothing: the new change surges',
    {
      ...input({
        specs: [next2],
        running: [
          running('m-1', m2, { card: 0, port: 20000, minutesAgo: 20 }),
          running('m-2', m2, { card: 1, port: 20001 }),
        ],
        nodes: [node('node-a', { cards: 3 })],
      }),
      rollouts: rolling('in-place', 'failed', model('m', 2, { context_length: 9 })),
    },
    { retire: ['m-1: the model changed'], add: ['m@main node-a [2] :20002'] },
  ],
];

/** A GPU profile of `cards` a100-80g cards (llama.cpp splits by layer) and a CPU fallback. */
function withFallback(cards: number, replicas = 1): ModelSpec {
  return model('m', replicas, {
    profiles: [
      gpu({ name: 'a100', engine: 'llamacpp', gpus_per_node: cards }),
      gpu({ name: 'cpu', engine: 'llamacpp', gpu_class: undefined, cpu: true, gpus_per_node: 0 }),
    ],
  });
}
const on4 = withFallback(4);
/** m-1 on cards 0–3 of node-a's 8, running the 4-card profile. */
const fourCards = (spec = on4): Running => {
  const r = running('m-1', spec, { card: 0, port: 20000, profile: 'a100', minutesAgo: 20 });
  return { ...r, shard: { ...r.shard, devices: [0, 1, 2, 3] } };
};
const eight = [node('node-a', { cards: 8 })];
const rollingTo = (mode: PlanRollout['mode'], spec: ModelSpec, profiles?: Record<string, number>) =>
  new Map<string, PlanRollout>([
    ['m', { mode, state: 'rolling', spec, ...(profiles === undefined ? {} : { profiles }) }],
  ]);

/** A change of one profile rolls on that profile: never onto the fallback because of it. */
const onItsProfile: [string, FleetPlanInput, Expected][] = [
  [
    'surge: the successor runs the changed profile beside its predecessor',
    {
      ...input({ specs: [withFallback(3)], running: [fourCards()], nodes: eight }),
      rollouts: rollingTo('surge', withFallback(3)),
    },
    { retire: ['m-1: the model changed'], add: ['m@a100 node-a [4,5,6] :20001'] },
  ],
  [
    'surge with no room beside it: the successor waits on its profile, naming it, not on the CPU fallback',
    {
      ...input({ specs: [withFallback(5)], running: [fourCards()], nodes: eight }),
      rollouts: rollingTo('surge', withFallback(5)),
    },
    {
      retire: ['m-1: the model changed'],
      pending: [
        'm ×1: profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (node-a: 4 free)',
      ],
    },
  ],
  [
    'surge, a pass later: still waiting on its profile while its predecessor serves',
    {
      ...input({
        specs: [withFallback(5)],
        running: [
          {
            ...fourCards(),
            replica: {
              ...fourCards().replica,
              retiring: true,
              retire_reason: 'the model changed',
              retiring_since: new Date(now - minute).toISOString(),
            },
          },
        ],
        nodes: eight,
      }),
      rollouts: rollingTo('surge', withFallback(5)),
    },
    {
      pending: [
        'm ×1: profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (node-a: 4 free)',
      ],
    },
  ],
  [
    'in place: the replica stops first; its successor waits for its cards on its profile',
    {
      ...input({ specs: [withFallback(5)], running: [fourCards()], nodes: eight }),
      rollouts: rollingTo('in-place', withFallback(5), { a100: 1 }),
    },
    {
      remove: ['m-1: the model changed (in place)'],
      pending: [
        'm ×1: profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (node-a: 4 free)',
      ],
    },
  ],
  [
    'in place, once it stopped: the successor takes the changed profile on the freed cards',
    {
      ...input({ specs: [withFallback(5)], running: [], nodes: eight }),
      rollouts: rollingTo('in-place', withFallback(5), { a100: 1 }),
    },
    { add: ['m@a100 node-a [0,1,2,3,4] :20000'] },
  ],
  [
    'in place, when its profile cannot take it at all: it waits on that profile rather than run on the CPU',
    {
      ...input({ specs: [withFallback(5)], running: [], nodes: [node('node-a', { cards: 4 })] }),
      rollouts: rollingTo('in-place', withFallback(5), { a100: 1 }),
    },
    {
      pending: [
        'm ×1: profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (node-a: 4 free)',
      ],
    },
  ],
  [
    'a replica on the fallback runs what it ran: a change of the GPU profile does not touch it',
    (() => {
      const onCpu = running('m-1', on4, { card: 0, port: 20000, profile: 'cpu' });
      return {
        ...input({
          specs: [withFallback(5)],
          running: [{ ...onCpu, shard: { ...onCpu.shard, devices: [] } }],
          nodes: eight,
        }),
        rollouts: rollingTo('surge', withFallback(5)),
      };
    })(),
    {},
  ],
];

describe('planFleet: a change rolls on its profile', () => {
  it.each(onItsProfile)('%s', (_what, inp, expected) => {
    expect(brief(planFleet(inp))).toEqual(expected);
  });
});

describe('successorProfiles', () => {
  const spec = withFallback(4);
  it.each<[string, { profile: string; retiring: boolean }[], Record<string, number> | undefined, string[]]>([
    ['nothing replaced', [{ profile: 'a100', retiring: false }], undefined, []],
    [
      'one beside a retiring replica, on its profile',
      [{ profile: 'a100', retiring: true }],
      undefined,
      ['a100'],
    ],
    [
      'in place: each profile back to what it ran at the start',
      [{ profile: 'cpu', retiring: false }],
      { a100: 2, cpu: 1 },
      ['a100', 'a100'],
    ],
    ['in place: none owed once back', [{ profile: 'a100', retiring: false }], { a100: 1 }, []],
    [
      'a profile the model no longer has pins nothing',
      [{ profile: 'gone', retiring: true }],
      { gone: 1 },
      [],
    ],
  ])('%s', (_what, replicas, started, pins) => {
    expect(successorProfiles(spec, replicas, started)).toEqual(pins);
  });
});

describe('planFleet: rolling changes', () => {
  it.each(rolls)('%s', (_what, inp, expected) => {
    expect(brief(planFleet(inp))).toEqual(expected);
  });
});

describe('planFleet', () => {
  it.each(cases)('%s', (_what, inp, expected) => {
    expect(brief(planFleet(inp))).toEqual(expected);
  });

  it('gives new replicas no id: the caller names them', () => {
    const plan = planFleet(input({ specs: [model('my-new-model', 2)] }));
    expect(plan.add).toHaveLength(2);
    for (const a of plan.add) for (const s of a.shards) expect(s).not.toHaveProperty('replica');
  });
});

describe('runsAsSpecified', () => {
  const base = model('m', 1, {
    context_length: 4096,
    profiles: [gpu({ env: { A: '1', B: '2' } }), gpu({ name: 'other' })],
  });
  const replica = { spec: base, profile: 'main' };
  it.each<[string, ModelSpec, boolean]>([
    ['the same model', base, true],
    ['another replica count', { ...base, replicas: 5 }, true],
    [
      'another profile changed',
      { ...base, profiles: [base.profiles[0]!, gpu({ name: 'other', args: ['--x'] })] },
      true,
    ],
    ['profiles in another order', { ...base, profiles: [...base.profiles].reverse() }, true],
    [
      'the environment written in another order',
      { ...base, profiles: [gpu({ env: { B: '2', A: '1' } }), gpu({ name: 'other' })] },
      true,
    ],
    [
      'its args changed',
      { ...base, profiles: [gpu({ env: { A: '1', B: '2' }, args: ['--x'] }), gpu({ name: 'other' })] },
      false,
    ],
    [
      'its environment changed',
      { ...base, profiles: [gpu({ env: { A: '1' } }), gpu({ name: 'other' })] },
      false,
    ],
    [
      'its engine changed',
      { ...base, profiles: [gpu({ env: { A: '1', B: '2' }, engine: 'sglang' }), gpu({ name: 'other' })] },
      false,
    ],
    ['the weights changed', { ...base, source: '/models/other' }, false],
    ['the context changed', { ...base, context_length: 8192 }, false],
    ['its profile left the model', { ...base, profiles: [gpu({ name: 'other' })] }, false],
  ])('%s', (_what, spec, same) => {
    expect(runsAsSpecified(replica, spec)).toBe(same);
  });
});
