// Placement benchmark: 2,500, 5,000 and 10,000 replicas onto 250, 500 and 1,000 nodes of
// 8 cards (a quarter of the nodes in MIG mode), timed against a naive first-fit placer
// written here and run on the same workload. Runs the built code: npm run bench:placement
// (npm run build && node bench/placement.bench.mjs). Prints a Markdown table for
// docs/performance.md.
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';

import { shapeFromConfig } from '../dist/models/config-shape.js';
import { place } from '../dist/placement/place.js';

const sizes = [2500, 5000, 10000];
const placeRuns = 21;
const baselineRuns = 3;
const cardClass = 'a100-80g';

/** Replicas per 10,000 of each kind of model, split over `models` models. */
const mix = [
  { kind: '2 nodes x 8 cards', models: 1, replicas: 25, profile: gpuProfile(cardClass, 8, 2) },
  { kind: '8 cards', models: 2, replicas: 100, profile: gpuProfile(cardClass, 8, 1) },
  { kind: '4 cards', models: 4, replicas: 200, profile: gpuProfile(cardClass, 4, 1) },
  { kind: '2 cards', models: 4, replicas: 600, profile: gpuProfile(cardClass, 2, 1) },
  { kind: '1 card', models: 8, replicas: 2000, profile: gpuProfile(cardClass, 1, 1) },
  { kind: 'MIG 3g.40gb', models: 6, replicas: 1500, profile: gpuProfile(`${cardClass}-mig-3g.40gb`, 1, 1) },
  { kind: 'MIG 1g.10gb', models: 10, replicas: 5000, profile: gpuProfile(`${cardClass}-mig-1g.10gb`, 1, 1) },
  { kind: 'CPU', models: 5, replicas: 575, profile: cpuProfile() },
];

function gpuProfile(gpuClass, perNode, nodes) {
  return {
    name: 'main',
    engine: 'vllm',
    gpu_class: gpuClass,
    tp: perNode * nodes,
    pp: 1,
    gpus_per_node: perNode,
    nodes,
    args: [],
    env: {},
    adapters: [],
  };
}

function cpuProfile() {
  return {
    name: 'cpu',
    engine: 'llamacpp',
    cpu: true,
    tp: 1,
    pp: 1,
    gpus_per_node: 0,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    min_memory_gb: 8,
  };
}

function device(id, cls, card, mig) {
  return {
    id,
    label: mig === undefined ? `${card}` : `${card}/mig${mig.instance}`,
    class: cls,
    card,
    uuid: `GPU-${id}`,
    ...(mig === undefined
      ? {}
      : { mig: { ...mig, gpu_instance_id: mig.instance + 1, compute_instance_id: 0 } }),
    memory_total_mib: 81920,
    memory_used_mib: 0,
    wear: {},
    processes: [],
  };
}

/** Node i: 8 whole cards; every fourth node in MIG mode, as 7 x 1g.10gb or as 2 x 3g.40gb + 1g.10gb per card. */
function makeNode(i) {
  const devices = [];
  const migLayout =
    i % 4 === 3
      ? i % 8 === 3
        ? ['1g.10gb', '1g.10gb', '1g.10gb', '1g.10gb', '1g.10gb', '1g.10gb', '1g.10gb']
        : ['3g.40gb', '3g.40gb', '1g.10gb']
      : undefined;
  for (let c = 0; c < 8; c++) {
    if (migLayout === undefined) devices.push(device(c, cardClass, c));
    else
      migLayout.forEach((p, k) =>
        devices.push(device(1000 + 100 * c + k, `${cardClass}-mig-${p}`, c, { profile: p, instance: k })),
      );
  }
  const name = `node-${String(i).padStart(5, '0')}`;
  return { name, ready: true, devices, excluded: [], cpus: 64, memory_mib: 1024 * 1024, address: name };
}

/**
 * Every GPU model's shape is known, so placement asks the memory planner on every pass: a
 * Llama-3.1-8B config.json with 2 GiB of weights (a 1B-sized model), at 4096 tokens, fits every
 * device here, so the shards placed are those the first-fit baseline places.
 */
const shape = shapeFromConfig({
  config: {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: 4096,
    intermediate_size: 14336,
    max_position_embeddings: 131072,
    num_attention_heads: 32,
    num_hidden_layers: 32,
    num_key_value_heads: 8,
    torch_dtype: 'bfloat16',
  },
  weightBytes: 2 * 2 ** 30,
});

function workload(replicas) {
  const scale = replicas / 10000;
  const models = [];
  const memory = new Map();
  for (const m of mix) {
    for (let k = 0; k < m.models; k++) {
      const name = `${m.kind.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}-${k}`;
      models.push({
        name,
        source: '/m',
        context_length: 4096,
        replicas: Math.round((m.replicas / m.models) * scale),
        profiles: [m.profile],
      });
      if (m.profile.cpu !== true) memory.set(name, { shape });
    }
  }
  const nodes = Array.from({ length: replicas / 10 }, (_, i) => makeNode(i));
  return { models, nodes, shards: [], ports: { first: 20000, last: 20199 }, cpuThreads: 0, memory };
}

function ids() {
  let n = 0;
  return (model) => `${model}-${++n}`;
}

/**
 * The baseline: first fit, as a scheduler written without thought for scale would do it. For
 * each replica it walks the nodes in order and counts each node's free devices of the class
 * by scanning its devices: replicas x nodes x devices.
 */
function firstFit(input) {
  const used = new Map(input.nodes.map((n) => [n.name, new Set()]));
  const ports = new Map(input.nodes.map((n) => [n.name, input.ports.first]));
  const threads = new Map(input.nodes.map((n) => [n.name, n.cpus]));
  const memory = new Map(input.nodes.map((n) => [n.name, n.memory_mib]));
  const shards = [];
  const pending = [];
  const newId = ids();
  for (const m of input.models) {
    let placed = 0;
    for (; placed < m.replicas; placed++) {
      const p = m.profiles[0];
      if (p.cpu) {
        const t = input.cpuThreads > 0 ? input.cpuThreads : (n) => Math.max(1, Math.floor(n.cpus / 2));
        const mem = Math.ceil(p.min_memory_gb * 1024);
        const n = input.nodes.find(
          (x) =>
            x.ready &&
            threads.get(x.name) >= (typeof t === 'number' ? t : t(x)) &&
            memory.get(x.name) >= mem &&
            ports.get(x.name) <= input.ports.last,
        );
        if (n === undefined) break;
        const tn = typeof t === 'number' ? t : t(n);
        threads.set(n.name, threads.get(n.name) - tn);
        memory.set(n.name, memory.get(n.name) - mem);
        shards.push({
          replica: newId(m.name),
          model: m.name,
          profile: p.name,
          rank: 0,
          ranks: 1,
          node: n.name,
          devices: [],
          port: ports.get(n.name),
          threads: tn,
          memory_mib: mem,
        });
        ports.set(n.name, ports.get(n.name) + 1);
        continue;
      }
      const mig = p.gpu_class.includes('-mig-');
      const free = (n) =>
        n.devices.filter(
          (d) => d.class === p.gpu_class && (d.mig !== undefined) === mig && !used.get(n.name).has(d.id),
        );
      const chosen = [];
      for (const n of input.nodes) {
        if (chosen.length === p.nodes) break;
        if (!n.ready || ports.get(n.name) > input.ports.last - 1) continue;
        const f = free(n);
        if (f.length >= p.gpus_per_node)
          chosen.push({ n, devices: f.slice(0, p.gpus_per_node).map((d) => d.id) });
      }
      if (chosen.length < p.nodes) break;
      const replica = newId(m.name);
      chosen.forEach(({ n, devices }, rank) => {
        for (const id of devices) used.get(n.name).add(id);
        const shard = {
          replica,
          model: m.name,
          profile: p.name,
          rank,
          ranks: p.nodes,
          node: n.name,
          devices,
          port: ports.get(n.name),
        };
        ports.set(n.name, ports.get(n.name) + 1);
        if (rank === 0 && p.nodes > 1) {
          shard.dist_port = ports.get(n.name);
          ports.set(n.name, ports.get(n.name) + 1);
        }
        shards.push(shard);
      });
    }
    if (placed < m.replicas) pending.push({ model: m.name, count: m.replicas - placed, reason: 'no room' });
  }
  return { shards, remove: [], pending };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function summary(result) {
  const replicas = new Set(result.shards.map((s) => s.replica)).size;
  const pending = result.pending.reduce((t, p) => t + p.count, 0);
  return { replicas, pending };
}

const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

const workloads = sizes.map(workload);

// Warm-up: V8 needs a dozen runs before place() settles into optimised code; time none of them.
for (let i = 0; i < 10; i++) for (const w of workloads) place({ ...w, newReplicaId: ids() });

// Sizes take turns, run by run, so a busy moment on the machine lands on all of them alike.
// The baseline runs after, so its garbage is not collected during place().
const samples = sizes.map(() => ({ ours: [], base: [], oursResult: undefined, baseResult: undefined }));
for (let run = 0; run < placeRuns; run++) {
  for (const [i, w] of workloads.entries()) {
    const t0 = performance.now();
    samples[i].oursResult = place({ ...w, newReplicaId: ids() });
    samples[i].ours.push(performance.now() - t0);
  }
}
firstFit(workloads[0]);
for (let run = 0; run < baselineRuns; run++) {
  for (const [i, w] of workloads.entries()) {
    const t0 = performance.now();
    samples[i].baseResult = firstFit(w);
    samples[i].base.push(performance.now() - t0);
  }
}
// Later passes at 10,000: what a reconciler runs most (everything kept), a scale-up, and a
// cluster asked for twice what fits (so pending reasons are written).
const big = workloads[workloads.length - 1];
const placedBig = samples[samples.length - 1].oursResult;
const passes = [
  ['all 10,000 kept, nothing to add', { ...big, shards: placedBig.shards }],
  [
    'all kept, 10% more replicas wanted',
    {
      ...big,
      shards: placedBig.shards,
      models: big.models.map((m) => ({ ...m, replicas: Math.round(m.replicas * 1.1) })),
    },
  ],
  [
    'from empty, twice what fits wanted',
    { ...big, models: big.models.map((m) => ({ ...m, replicas: m.replicas * 2 })) },
  ],
].map(([what, w]) => {
  for (let i = 0; i < 5; i++) place({ ...w, newReplicaId: ids() });
  const ms = [];
  let result;
  for (let i = 0; i < placeRuns; i++) {
    const t0 = performance.now();
    result = place({ ...w, newReplicaId: ids() });
    ms.push(performance.now() - t0);
  }
  return { what, given: new Set(w.shards), ms: median(ms), result };
});

const rows = sizes.map((size, i) => ({
  size,
  nodes: workloads[i].nodes.length,
  wanted: workloads[i].models.reduce((t, m) => t + m.replicas, 0),
  ours: { ms: median(samples[i].ours), min: Math.min(...samples[i].ours), result: samples[i].oursResult },
  base: { ms: median(samples[i].base), result: samples[i].baseResult },
}));

console.log(`Node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'} (${cpus().length} CPUs)`);
console.log(
  `place: median (and fastest) of ${placeRuns} runs; first-fit baseline: median of ${baselineRuns} runs; after a warm-up.\n`,
);
console.log(
  '| replicas wanted | nodes | place, ms (fastest) | placed / pending | first-fit baseline, ms | placed / pending | speedup |',
);
console.log('|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  const o = summary(r.ours.result);
  const b = summary(r.base.result);
  console.log(
    `| ${r.wanted} | ${r.nodes} | ${fmt(r.ours.ms)} (${fmt(r.ours.min)}) | ${o.replicas} / ${o.pending} | ${fmt(r.base.ms)} | ${b.replicas} / ${b.pending} | ${(r.base.ms / r.ours.ms).toFixed(1)}x |`,
  );
}
const [, half, full] = rows;
console.log(
  `\nLinearity, 10k / 5k (2.0 is linear): place ${(full.ours.ms / half.ours.ms).toFixed(2)} ` +
    `(fastest runs: ${(full.ours.min / half.ours.min).toFixed(2)}), baseline ${(full.base.ms / half.base.ms).toFixed(2)}.`,
);
console.log(
  `Target, 10,000 replicas under 1 s: ${full.ours.ms < 1000 ? 'met' : 'MISSED'} (${fmt(full.ours.ms)} ms).`,
);
console.log(`\nLater passes on the 1,000 nodes (median of ${placeRuns} runs):\n`);
console.log('| pass | place (ms) | added / pending replicas |');
console.log('|---|---:|---:|');
for (const p of passes) {
  const added = new Set(p.result.shards.filter((s) => !p.given.has(s)).map((s) => s.replica)).size;
  const pending = p.result.pending.reduce((t, x) => t + x.count, 0);
  console.log(`| ${p.what} | ${fmt(p.ms)} | ${added} / ${pending} |`);
}
