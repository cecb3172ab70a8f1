import { describe, expect, it } from 'vitest';

import { seeded as mulberry32 } from '../../test/support/timing.js';

import { isMigClass } from '../catalog/gpu-class.js';
import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import type { Device, ExcludedCard } from '../gpu/types.js';

import { place } from './place.js';
import type { PlacementInput, PlacementNode, PlacementResult, Shard } from './types.js';

/**
 * Properties on random clusters (seeded, so a failure names the seed that reproduces it),
 * and a differential check against a naive placer that scans every node for every replica
 * under the same rules: the buckets of the real one must choose exactly the same.
 */

interface Rng {
  int(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

function rng(seed: number): Rng {
  const next = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return {
    int,
    pick: <T>(items: readonly T[]): T => items[int(0, items.length - 1)] as T,
    chance: (p) => next() < p,
  };
}

const wholeClasses = ['a100-80g', 'h100-80g', 'l4-24g'];

function device(
  id: number,
  cls: string,
  onCard: number,
  mig?: { profile: string; instance: number },
): Device {
  return {
    id,
    label: mig === undefined ? `${onCard}` : `${onCard}/mig${mig.instance}`,
    class: cls,
    card: onCard,
    uuid: `U-${id}`,
    ...(mig === undefined ? {} : { mig: { ...mig, gpu_instance_id: mig.instance, compute_instance_id: 0 } }),
    memory_total_mib: 1,
    memory_used_mib: 0,
    wear: {},
    processes: [],
  };
}

function randomNode(r: Rng, name: string, classes: readonly string[]): PlacementNode {
  const devices: Device[] = [];
  const excluded: ExcludedCard[] = [];
  const cardCount = r.pick([0, 0, 1, 2, 4, 8]);
  const cls = r.pick(classes);
  const migMode = cls === 'a100-80g' && r.chance(0.5);
  for (let c = 0; c < cardCount; c++) {
    if (!migMode || r.chance(0.2)) {
      devices.push(device(c, cls, c));
      continue;
    }
    const layout = r.pick(['7x1g', '2x3g+1g', 'none']);
    const profiles =
      layout === '7x1g'
        ? Array<string>(7).fill('1g.10gb')
        : layout === '2x3g+1g'
          ? ['3g.40gb', '3g.40gb', '1g.10gb']
          : [];
    if (profiles.length === 0)
      excluded.push({
        card: c,
        uuid: `GPU-${c}`,
        class: cls,
        reason: 'MIG mode with no instance carved: create some',
      });
    profiles.forEach((p, i) =>
      devices.push(device(1000 + 100 * c + i, `${cls}-mig-${p}`, c, { profile: p, instance: i })),
    );
  }
  return {
    name,
    ready: r.chance(0.85),
    devices,
    excluded,
    cpus: r.pick([0, 2, 8, 16, 64]),
    memory_mib: r.pick([0, 4096, 16384, 65536]),
    address: name,
  };
}

function randomProfile(r: Rng, name: string, classes: readonly string[]): ProfileSpec {
  const base = {
    name,
    engine: 'vllm' as const,
    tp: 1,
    pp: 1,
    gpus_per_node: 1,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
  };
  const kind = r.pick(['whole', 'whole', 'mig', 'cpu']);
  if (kind === 'cpu') {
    const mem = r.pick([undefined, 0.5, 2, 8]);
    return {
      ...base,
      engine: 'llamacpp',
      cpu: true,
      gpus_per_node: 0,
      ...(mem === undefined ? {} : { min_memory_gb: mem }),
    };
  }
  if (kind === 'mig') {
    // Now and then a MIG profile the catalog would have refused.
    const tp = r.chance(0.15) ? 2 : 1;
    return { ...base, gpu_class: `a100-80g-mig-${r.pick(['1g.10gb', '3g.40gb'])}`, tp, gpus_per_node: tp };
  }
  const nodes = r.chance(0.25) ? r.pick([2, 3]) : 1;
  const perNode = nodes > 1 ? r.pick([1, 2, 4]) : r.pick([1, 1, 2, 4, 8]);
  // Now and then a class no node has.
  const cls = r.chance(0.1) ? r.pick(wholeClasses) : r.pick(classes);
  return { ...base, gpu_class: cls, tp: perNode * nodes, gpus_per_node: perNode, nodes };
}

function counter(): (model: string) => string {
  const next = new Map<string, number>();
  return (m) => {
    const n = (next.get(m) ?? 0) + 1;
    next.set(m, n);
    return `${m}-${n}`;
  };
}

/** A cluster, models, and shards from an earlier pass that the cluster and models have since moved on from. */
function randomInput(seed: number): PlacementInput {
  const r = rng(seed);
  const nodeCount = r.int(0, 12);
  const classes = r.chance(0.5) ? ['a100-80g'] : ['a100-80g', r.pick(wholeClasses)];
  const order = Array.from({ length: nodeCount }, (_, i) => i).sort(() => (r.chance(0.5) ? 1 : -1));
  const nodes = order.map((i) => randomNode(r, `n-${i}`, classes));
  const models: ModelSpec[] = Array.from({ length: r.int(1, 6) }, (_, i) => ({
    name: `m${i}`,
    source: `/m${i}`,
    replicas: r.int(0, 8),
    profiles: Array.from({ length: r.int(1, 3) }, (_, j) => randomProfile(r, `p${j}`, classes)),
  }));
  const last = 20000 + r.int(1, 40);
  const cpuThreads = r.chance(0.5) ? 0 : r.int(1, 8);

  // The earlier pass: every node ready, its own replica counts.
  const before = place({
    models: models.map((m) => ({ ...m, replicas: r.int(0, 8) })),
    nodes: nodes.map((n) => ({ ...n, ready: true })),
    shards: [],
    ports: { first: 20000, last },
    cpuThreads,
    newReplicaId: (m) => `old-${m}-${r.int(0, 1e6)}`,
  });
  // Since then: a model may be gone, one new.
  const now = models.filter(() => r.chance(0.85));
  if (r.chance(0.3))
    now.push({
      name: 'late',
      source: '/late',
      replicas: r.int(1, 5),
      profiles: [randomProfile(r, 'p0', classes)],
    });
  // Since then, other programs took ports on some nodes (their own stream: the seeds above stay as they were).
  const rp = rng(seed * 7919 + 1);
  const withTaken = nodes.map((n) => {
    if (!rp.chance(0.4)) return n;
    const ranges = Array.from({ length: rp.int(1, 3) }, () => {
      const first = 20000 + rp.int(-5, 45);
      return { first, last: first + rp.int(0, 6) };
    });
    return { ...n, ports_taken: ranges };
  });
  return {
    models: now,
    nodes: withTaken,
    shards: before.shards,
    ports: { first: 20000, last },
    cpuThreads,
    newReplicaId: counter(),
  };
}

// ---- the naive placer: scans every node for every replica, same rules ----

interface RefNode {
  node: PlacementNode;
  freeIds: Map<string, number[]>;
  ports: Set<number>;
  threads: number;
  memory: number;
}

function refState(inp: PlacementInput, shards: readonly Shard[]): Map<string, RefNode> {
  const out = new Map<string, RefNode>();
  for (const n of [...inp.nodes].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const used = new Set(shards.filter((s) => s.node === n.name).flatMap((s) => s.devices));
    const freeIds = new Map<string, number[]>();
    for (const d of [...n.devices].sort((a, b) => a.id - b.id)) {
      const key = `${d.mig === undefined ? 'card' : 'mig'}:${d.class}`;
      if (!freeIds.has(key)) freeIds.set(key, []);
      if (!used.has(d.id)) freeIds.get(key)?.push(d.id);
    }
    const mine = shards.filter((s) => s.node === n.name);
    out.set(n.name, {
      node: n,
      freeIds,
      ports: new Set([
        ...mine.flatMap((s) => [s.port, ...(s.dist_port === undefined ? [] : [s.dist_port])]),
        ...(n.ports_taken ?? []).flatMap((t) =>
          Array.from({ length: t.last - t.first + 1 }, (_, i) => t.first + i),
        ),
      ]),
      threads: n.cpus - mine.reduce((t, s) => t + (s.threads ?? 0), 0),
      memory: n.memory_mib - mine.reduce((t, s) => t + (s.memory_mib ?? 0), 0),
    });
  }
  return out;
}

function freePorts(inp: PlacementInput, n: RefNode): number[] {
  const out: number[] = [];
  for (let p = inp.ports.first; p <= inp.ports.last; p++) if (!n.ports.has(p)) out.push(p);
  return out;
}

type Choice = { node: RefNode; free: number }[];

/** The nodes a replica of a profile would go to now, or undefined. */
function refChoose(
  inp: PlacementInput,
  state: Map<string, RefNode>,
  counts: Map<string, number>,
  p: ProfileSpec,
): Choice | undefined {
  const key = (n: RefNode, free: number): [number, number, string] => [
    counts.get(n.node.name) ?? 0,
    free,
    n.node.name,
  ];
  const less = (a: [number, number, string], b: [number, number, string]) =>
    a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
  const best = (fits: (n: RefNode) => number | undefined, skip: Set<RefNode>) => {
    let found: { node: RefNode; free: number; k: [number, number, string] } | undefined;
    for (const n of state.values()) {
      if (!n.node.ready || skip.has(n)) continue;
      const free = fits(n);
      if (free === undefined) continue;
      const k = key(n, free);
      if (found === undefined || less(k, found.k) < 0) found = { node: n, free, k };
    }
    return found;
  };
  if (p.cpu === true) {
    const mem = p.min_memory_gb === undefined ? 1024 : Math.ceil(p.min_memory_gb * 1024);
    const f = best((n) => {
      const t = inp.cpuThreads > 0 ? inp.cpuThreads : Math.max(1, Math.floor(n.node.cpus / 2));
      return n.node.cpus > 0 && n.threads >= t && n.memory >= mem && freePorts(inp, n).length >= 1
        ? n.threads
        : undefined;
    }, new Set());
    return f === undefined ? undefined : [f];
  }
  const cls = p.gpu_class;
  if (cls === undefined) return undefined;
  const mig = isMigClass(cls);
  if (mig && (p.tp > 1 || p.pp > 1 || p.gpus_per_node > 1 || p.nodes > 1)) return undefined;
  const key2 = `${mig ? 'mig' : 'card'}:${cls}`;
  const per = mig ? 1 : p.gpus_per_node;
  const nodes = mig ? 1 : p.nodes;
  const chosen: Choice = [];
  const skip = new Set<RefNode>();
  for (let i = 0; i < nodes; i++) {
    const needPorts = i === 0 && nodes > 1 ? 2 : 1;
    const f = best((n) => {
      const free = n.freeIds.get(key2)?.length ?? 0;
      return free >= per && freePorts(inp, n).length >= needPorts ? free : undefined;
    }, skip);
    if (f === undefined) return undefined;
    chosen.push(f);
    skip.add(f.node);
  }
  return chosen;
}

function reference(
  inp: PlacementInput,
  kept: readonly Shard[],
): { added: Shard[]; pending: Map<string, number> } {
  const state = refState(inp, inp.shards);
  const ids = counter();
  const added: Shard[] = [];
  const pending = new Map<string, number>();
  const seen = new Set<string>();
  for (const m of inp.models) {
    if (seen.has(m.name)) continue;
    seen.add(m.name);
    const mine = kept.filter((s) => s.model === m.name);
    const counts = new Map<string, number>();
    for (const rep of new Set(mine.map((s) => s.replica))) {
      for (const n of new Set(mine.filter((s) => s.replica === rep).map((s) => s.node)))
        counts.set(n, (counts.get(n) ?? 0) + 1);
    }
    const missing = m.replicas - new Set(mine.map((s) => s.replica)).size;
    for (let i = 0; i < missing; i++) {
      let done = false;
      for (const p of m.profiles) {
        const choice = refChoose(inp, state, counts, p);
        if (choice === undefined) continue;
        const replica = ids(m.name);
        choice.forEach(({ node }, rank) => {
          const take = () => {
            const port = freePorts(inp, node)[0] ?? -1;
            node.ports.add(port);
            return port;
          };
          const s: Shard = {
            replica,
            model: m.name,
            profile: p.name,
            rank,
            ranks: choice.length,
            node: node.node.name,
            devices: [],
            port: take(),
          };
          if (p.cpu === true) {
            s.threads = inp.cpuThreads > 0 ? inp.cpuThreads : Math.max(1, Math.floor(node.node.cpus / 2));
            s.memory_mib = p.min_memory_gb === undefined ? 1024 : Math.ceil(p.min_memory_gb * 1024);
            s.ranks = 1;
            node.threads -= s.threads;
            node.memory -= s.memory_mib;
          } else {
            const cls = p.gpu_class ?? '';
            const list = node.freeIds.get(`${isMigClass(cls) ? 'mig' : 'card'}:${cls}`) ?? [];
            s.devices = list.splice(0, isMigClass(cls) ? 1 : p.gpus_per_node);
            if (rank === 0 && choice.length > 1) s.dist_port = take();
          }
          counts.set(node.node.name, (counts.get(node.node.name) ?? 0) + 1);
          added.push(s);
        });
        done = true;
        break;
      }
      if (!done) {
        pending.set(m.name, missing - i);
        // Nothing is freed while placing: at the end, still no profile fits.
        for (const p of m.profiles) expect(refChoose(inp, state, counts, p)).toBeUndefined();
        break;
      }
    }
  }
  return { added, pending };
}

// ---- the properties ----

function check(inp: PlacementInput, r: PlacementResult): void {
  const nodes = new Map(inp.nodes.map((n) => [n.name, n]));
  const given = new Set(inp.shards);
  const added = r.shards.filter((s) => !given.has(s));

  // Every shard given is kept (as it is, in order) or removed, whole replicas at a time.
  expect(r.shards.filter((s) => given.has(s))).toEqual(inp.shards.filter((s) => !r.remove.includes(s)));
  expect(r.remove.every((s) => given.has(s))).toBe(true);
  const removedReplicas = new Set(r.remove.map((s) => `${s.model}/${s.replica}`));
  expect(inp.shards.filter((s) => removedReplicas.has(`${s.model}/${s.replica}`))).toEqual(r.remove);

  // Replicas add up: kept + added + pending = wanted, for every model still there.
  const models = new Map<string, ModelSpec>();
  for (const m of inp.models) if (!models.has(m.name)) models.set(m.name, m);
  for (const m of models.values()) {
    const replicas = new Set(r.shards.filter((s) => s.model === m.name).map((s) => s.replica)).size;
    const waiting = r.pending.find((p) => p.model === m.name)?.count ?? 0;
    expect(replicas + waiting).toBe(m.replicas);
    if (waiting > 0) expect(r.pending.find((p) => p.model === m.name)?.reason).not.toBe('');
  }
  for (const s of r.shards) expect(models.has(s.model)).toBe(true);

  // Nothing on a node is given twice; removed shards still hold theirs in this pass.
  const holding = [...r.shards, ...r.remove];
  for (const n of inp.nodes) {
    const mine = holding.filter((s) => s.node === n.name);
    const devs = mine.flatMap((s) => s.devices);
    expect(new Set(devs).size).toBe(devs.length);
    const ports = mine.flatMap((s) => [s.port, ...(s.dist_port === undefined ? [] : [s.dist_port])]);
    expect(new Set(ports).size).toBe(ports.length);
    expect(mine.reduce((t, s) => t + (s.threads ?? 0), 0)).toBeLessThanOrEqual(Math.max(0, n.cpus));
    expect(mine.reduce((t, s) => t + (s.memory_mib ?? 0), 0)).toBeLessThanOrEqual(Math.max(0, n.memory_mib));
  }

  // New shards: on ready nodes, the right devices, ports in range.
  const byReplica = new Map<string, Shard[]>();
  for (const s of added) {
    const n = nodes.get(s.node);
    expect(n?.ready).toBe(true);
    expect(s.port).toBeGreaterThanOrEqual(inp.ports.first);
    expect(s.port).toBeLessThanOrEqual(inp.ports.last);
    // Never a port another program listens on there.
    for (const p of [s.port, ...(s.dist_port === undefined ? [] : [s.dist_port])]) {
      expect((n?.ports_taken ?? []).some((t) => p >= t.first && p <= t.last)).toBe(false);
    }
    const p = models.get(s.model)?.profiles.find((q) => q.name === s.profile);
    if (p === undefined) throw new Error(`shard of an unknown profile ${s.model}/${s.profile}`);
    const devs = s.devices.map((id) => n?.devices.find((d) => d.id === id));
    if (p.cpu === true) {
      expect(s.devices).toEqual([]);
      expect(s.threads).toBe(
        inp.cpuThreads > 0 ? inp.cpuThreads : Math.max(1, Math.floor((n?.cpus ?? 0) / 2)),
      );
      expect(s.memory_mib).toBe(p.min_memory_gb === undefined ? 1024 : Math.ceil(p.min_memory_gb * 1024));
    } else if (isMigClass(p.gpu_class ?? '')) {
      // A MIG replica: exactly one instance of its class, on one node.
      expect(devs.length).toBe(1);
      expect(devs[0]?.mig).toBeDefined();
      expect(devs[0]?.class).toBe(p.gpu_class);
      expect(s.ranks).toBe(1);
    } else {
      expect(devs.length).toBe(p.gpus_per_node);
      for (const d of devs) {
        expect(d?.mig).toBeUndefined();
        expect(d?.class).toBe(p.gpu_class);
      }
    }
    const list = byReplica.get(s.replica) ?? [];
    list.push(s);
    byReplica.set(s.replica, list);
  }

  // Multi-node replicas are whole: ranks 0..n-1 on distinct nodes, the head with dist_port.
  for (const shards of byReplica.values()) {
    const ranks = shards[0]?.ranks ?? 0;
    expect(shards.map((s) => s.rank)).toEqual(Array.from({ length: ranks }, (_, i) => i));
    expect(new Set(shards.map((s) => s.node)).size).toBe(ranks);
    for (const s of shards) expect(s.dist_port !== undefined).toBe(ranks > 1 && s.rank === 0);
  }
}

const seeds = Array.from({ length: 400 }, (_, i) => i + 1);

describe('place on random clusters', () => {
  it.each(seeds)('seed %i: invariants hold, and it chooses as the naive placer does', (seed) => {
    const inp = randomInput(seed);
    const before = structuredClone(inp.shards);
    const r = place(inp);
    // Placement changes nothing it was given.
    expect(inp.shards).toEqual(before);
    check(inp, r);

    const ref = reference(
      { ...inp, newReplicaId: counter() },
      r.shards.filter((s) => inp.shards.includes(s)),
    );
    expect(r.shards.filter((s) => !inp.shards.includes(s))).toEqual(ref.added);
    expect(new Map(r.pending.map((p) => [p.model, p.count]))).toEqual(ref.pending);

    // Same input, same output.
    expect(place({ ...inp, newReplicaId: counter() })).toEqual(r);
  });

  it('covers what it claims to: the seeds place, refuse, remove and span nodes', () => {
    let added = 0;
    let removed = 0;
    let pending = 0;
    let multi = 0;
    let migShards = 0;
    let cpuShards = 0;
    for (const seed of seeds) {
      const inp = randomInput(seed);
      const r = place(inp);
      const fresh = r.shards.filter((s) => !inp.shards.includes(s));
      added += fresh.length;
      removed += r.remove.length;
      pending += r.pending.length;
      multi += fresh.filter((s) => s.ranks > 1).length;
      migShards += fresh.filter((s) => s.devices.some((d) => d >= 1000)).length;
      cpuShards += fresh.filter((s) => s.threads !== undefined).length;
    }
    for (const n of [added, removed, pending, multi, migShards, cpuShards]) expect(n).toBeGreaterThan(20);
  });
});
