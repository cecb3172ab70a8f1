import { describe, expect, it } from 'vitest';

import { configs } from '../../test/fakes/gguf/models.js';
import { validateModel } from '../catalog/validate.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { changeContext } from '../planner/change-context.js';
import { changeGpus } from '../planner/change-gpus.js';
import { planOptions } from '../planner/options.js';
import { MIB } from '../planner/units.js';

import { engines } from './registry.js';
import type { Engine } from './types.js';
import { vllmEngine } from './vllm/vllm-engine.js';

/**
 * A new engine is its folder and one line of the registry: the catalog, the planner and the
 * changes of a model's context or cards take the engines they are given, and need nothing
 * else. A fifth engine (here Hugging Face's TGI, built on vLLM's budget for the sake of the
 * test) is added to the registry's list and nowhere else.
 */
const tgi: Engine = {
  ...vllmEngine,
  name: 'tgi',
  label: 'TGI',
  cardFlags: { cards: ['--num-shard'], pp: [] },
  context: { flags: ['--max-total-tokens'] },
  pastTrained: undefined,
  ownedFlags: ['--hostname', '--port'],
  ownedEnv: {},
};
const withTgi: readonly Engine[] = [...engines, tgi];

const qwen7b = shapeFromConfig({
  config: configs.qwen25_7b.json,
  weightBytes: configs.qwen25_7b.weightBytes,
});
const written = {
  name: 'qwen',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 8192,
  profiles: [{ name: 'tgi-l4', engine: 'tgi', gpu_class: 'l4-24g', args: ['--num-shard', '1'] }],
};

describe('a fifth engine, added to the registry alone', () => {
  it('is refused by the catalog without it, with the names it knows', () => {
    const r = validateModel(written, engines);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.issues[0]).toMatchObject({
      path: ['profiles', 0, 'engine'],
      message: expect.stringContaining('expected one of "llamacpp", "vllm", "sglang", "trtllm", got "tgi"'),
    });
  });

  it('is taken by the catalog with it, checked by its own rules', () => {
    const r = validateModel(written, withTgi);
    expect(r.ok && r.model.profiles[0]).toMatchObject({ engine: 'tgi', tp: 1, gpus_per_node: 1 });
    const owned = validateModel(
      { ...written, profiles: [{ ...written.profiles[0], args: ['--hostname', 'x'] }] },
      withTgi,
    );
    expect(!owned.ok && owned.issues[0]?.message).toMatch(/^llmgw sets --hostname itself/);
  });

  it('is planned beside the others, in its own name', () => {
    const l4 = { class: 'l4-24g', memoryBytes: 23034 * MIB };
    const answer = planOptions({
      engines: withTgi,
      model: 'qwen',
      shape: qwen7b,
      profiles: [],
      classes: [l4],
      context: 8192,
    });
    expect(answer.options.map((o) => o.engine).sort()).toEqual(['sglang', 'tgi', 'trtllm', 'vllm']);
  });

  it('has its context and its cards changed in its own flags', () => {
    const r = validateModel(written, withTgi);
    if (!r.ok) throw new Error('refused');
    const base = { engines: withTgi, spec: r.model, shape: qwen7b, classes: [] };
    const context = changeContext({ ...base, declared: false, tokens: 16384, defaultSlots: 4 });
    expect(context.spec.profiles[0]?.args).toEqual(['--num-shard', '1', '--max-total-tokens', '16384']);
    const gpus = changeGpus({ ...base, gpus: 2, nodes: [{ name: 'n1', cards: { 'l4-24g': 2 } }] });
    expect(gpus.after).toMatchObject({ cards: 2, tp: 2 });
    expect(gpus.dropped).toEqual(['--num-shard 1']);
  });
});
