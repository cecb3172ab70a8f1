import { describe, expect, it } from 'vitest';

import { configs } from '../../test/fakes/gguf/models.js';
import { engines } from '../../test/support/engines.js';
import { isMigClass } from '../catalog/gpu-class.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { known, type ModelShape } from '../models/shape.js';
import { classMemoryBytes, knownCardClasses, migClassesOf } from './class-memory.js';
import { planProfile } from './plan.js';
import type { PlanEngine } from './plan-engine.js';
import type { MemoryPlan, ModelDims } from './types.js';

/**
 * The rules every engine's budget keeps on every class the planner knows (whole cards and each
 * of their MIG profiles): a card's budget is never more than the device has; a replica fits
 * exactly when no card needs more than its budget; and on a MIG instance, one device whatever
 * the count, no remedy asks for more cards, and every class a remedy names holds the replica.
 */

/** Llama shapes from their config.json (meta-llama on the hub): the 1B, 8B and 70B. */
const llama = (o: { hidden: number; ff: number; layers: number; heads: number; bytes: number }) =>
  shapeFromConfig({
    config: {
      ...configs.llama31_8b.json,
      hidden_size: o.hidden,
      intermediate_size: o.ff,
      num_hidden_layers: o.layers,
      num_attention_heads: o.heads,
    },
    weightBytes: o.bytes,
  });
const models: { name: string; shape: ModelShape; dims: ModelDims }[] = [
  { name: '1B', hidden: 2048, ff: 8192, layers: 16, heads: 32, bytes: 2_471_645_184 },
  { name: '8B', hidden: 4096, ff: 14336, layers: 32, heads: 32, bytes: configs.llama31_8b.weightBytes },
  { name: '70B', hidden: 8192, ff: 28672, layers: 80, heads: 64, bytes: 141_107_412_992 },
].map((m) => ({
  name: m.name,
  shape: llama(m),
  dims: { hidden: m.hidden, feedForward: m.ff, vocab: 128256 },
}));
/** The same as a Q4_K_M GGUF (about 0.6 of the bf16 bytes), for llama.cpp. */
const gguf = (s: ModelShape): ModelShape => ({
  ...s,
  from: 'gguf',
  dtype: known('Q4_K_M'),
  weightBytes: known(s.weightBytes.known ? s.weightBytes.value * 0.3 : 0),
});

const classes = [...knownCardClasses(), ...knownCardClasses().flatMap(migClassesOf)];
const contexts = [4096, 32768, 131072];

interface Case {
  engine: string;
  cls: string;
  model: string;
  context: number;
  shape: ModelShape;
  dims: ModelDims;
  plan: MemoryPlan;
  memory: number;
}

const cases: Case[] = [];
for (const engine of engines) {
  for (const cls of classes) {
    const memory = classMemoryBytes(cls) ?? NaN;
    for (const m of models) {
      for (const context of contexts) {
        const shape = engine.formats.includes('gguf') ? gguf(m.shape) : m.shape;
        const plan = planProfile({
          engines,
          shape,
          dims: m.dims,
          profile: { name: 'p', engine: engine.name, tp: 1, pp: 1, gpus_per_node: 1, args: [] },
          device: { class: cls, memoryBytes: memory },
          context,
        });
        cases.push({ engine: engine.name, cls, model: m.name, context, shape, dims: m.dims, plan, memory });
      }
    }
  }
}
const named = (c: Case) => `${c.engine} ${c.model} at ${c.context} on ${c.cls}`;
const classIn = /\b[a-z0-9]+-\d+g(?:-mig-(?:\d+c\.)?\d+g\.\d+gb(?:\+me)?)?\b/g;

describe('every engine on every class the planner knows', () => {
  it('covers whole cards and each of their MIG profiles, and plans each case', () => {
    expect(classes).toEqual(expect.arrayContaining(['a100-80g-mig-1g.10gb', 'a100-40g-mig-1g.5gb']));
    expect(classes.filter(isMigClass).length).toBeGreaterThanOrEqual(4 * 6);
    for (const cls of classes) expect(classMemoryBytes(cls), cls).toBeGreaterThan(0);
    for (const c of cases) expect(c.plan.perCard.length, named(c)).toBeGreaterThan(0);
    // Both answers occur on MIG instances, so the rules below are held on each side.
    const mig = cases.filter((c) => isMigClass(c.cls));
    expect(mig.some((c) => c.plan.fits)).toBe(true);
    expect(mig.some((c) => !c.plan.fits)).toBe(true);
  });

  it('gives no card a budget above its memory', () => {
    for (const c of cases) {
      for (const card of c.plan.perCard) expect(card.budget, named(c)).toBeLessThanOrEqual(c.memory);
    }
  });

  it('fits exactly when no card needs more than its budget, and says why not otherwise', () => {
    for (const c of cases) {
      const over = c.plan.perCard.some((card) => card.total > card.budget);
      expect(c.plan.fits, named(c)).toBe(!over);
      expect(c.plan.reason === undefined, named(c)).toBe(c.plan.fits);
    }
  });

  it('on a MIG instance asks for no more cards, and names only classes that hold the replica', () => {
    for (const c of cases.filter((x) => isMigClass(x.cls) && x.plan.reason !== undefined)) {
      const reason = c.plan.reason ?? '';
      expect(reason, named(c)).not.toMatch(/\bcards\b/);
      for (const other of new Set(reason.match(classIn) ?? [])) {
        if (other === c.cls) continue;
        const there = planProfile({
          engines,
          shape: c.shape,
          dims: c.dims,
          profile: { name: 'p', engine: c.plan.engine, tp: 1, pp: 1, gpus_per_node: 1, args: [] },
          device: { class: other, memoryBytes: classMemoryBytes(other) ?? NaN },
          context: c.context,
          maxCards: 0,
        });
        expect(there.fits, `${named(c)}: ${other}`).toBe(true);
      }
    }
  });
});

describe('the rule holds for an engine whose own figure is more than the card', () => {
  // As TensorRT-LLM's was once: a budget counted up from the weights, past what the card has.
  const base = engines.find((e) => e.name === 'vllm') as PlanEngine;
  const greedy: PlanEngine = {
    ...base,
    name: 'greedy',
    budget: (s) => {
      const made = base.budget(s);
      if ('problem' in made) return made;
      const at: typeof made.budget.at = (context, kv) => {
        const ev = made.budget.at(context, kv);
        return { ...ev, perCard: ev.perCard.map((c) => ({ ...c, budget: 3 * s.memory })) };
      };
      return { budget: { ...made.budget, at } };
    },
  };
  const run = (cls: string, model: (typeof models)[number]) =>
    planProfile({
      engines: [...engines, greedy],
      shape: model.shape,
      dims: model.dims,
      profile: { name: 'p', engine: 'greedy', tp: 1, pp: 1, gpus_per_node: 1, args: [] },
      device: { class: cls, memoryBytes: classMemoryBytes(cls) ?? NaN },
      context: 4096,
    });

  it('is held to the memory of the device, and does not fit what the device cannot hold', () => {
    const [small, , large] = models as [(typeof models)[number], unknown, (typeof models)[number]];
    const tooBig = run('a100-80g-mig-1g.10gb', large);
    expect(tooBig.perCard[0]?.budget).toBe(classMemoryBytes('a100-80g-mig-1g.10gb'));
    expect(tooBig.fits).toBe(false);
    expect(run('a100-80g-mig-1g.10gb', small).fits).toBe(true);
  });
});
