import { describe, expect, it } from 'vitest';

import type { EngineName, ModelSpec, ProfileSpec } from '../catalog/model-spec.js';

import type { Engine, EngineSettings, ShardDevice, ShardLaunch } from './types.js';

/**
 * What every engine promises, whatever its flags: run by each engine's test with the few
 * facts that differ between engines.
 */

export const settings: EngineSettings = {
  bin: '/opt/engine/bin/serve',
  llamacpp: { parallel: 4, threads: 0 },
  cpuCount: 16,
};

/** Whole A100s 0..3 of a node. */
export const cards: ShardDevice[] = [0, 1, 2, 3].map((i) => ({
  id: i,
  label: String(i),
  class: 'a100-80g',
  card: i,
  uuid: `GPU-0000000${i}-aaaa-bbbb-cccc-dddddddddddd`,
}));

/** Instance 1 of card 2, in MIG mode. */
export const migInstance: ShardDevice = {
  id: 1201,
  label: '2/mig1',
  class: 'a100-80g-mig-3g.40gb',
  card: 2,
  uuid: 'MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c',
  mig: { profile: '3g.40gb', instance: 1, gpu_instance_id: 2, compute_instance_id: 0 },
};

export const model: ModelSpec = {
  name: 'qwen-7b',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 8192,
  replicas: 1,
  profiles: [],
};

export function profile(engine: EngineName, over: Partial<ProfileSpec> = {}): ProfileSpec {
  return {
    name: 'main',
    engine,
    gpu_class: 'a100-80g',
    tp: 1,
    pp: 1,
    gpus_per_node: 1,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    ...over,
  };
}

export const apiKey = 'sk-engine-0123456789abcdef';

/** One shard of one card, rank 0 of 1; what each case changes is passed over it. */
export function launch(engine: EngineName, over: Partial<ShardLaunch> = {}): ShardLaunch {
  return {
    replica: 'qwen-7b-main-1',
    model,
    profile: profile(engine),
    rank: 0,
    ranks: 1,
    host: '127.0.0.1',
    port: 18080,
    devices: cards.slice(0, 1),
    apiKey,
    weights: { path: engine === 'llamacpp' ? '/models/qwen-7b/qwen-7b-q4_k_m.gguf' : '/models/qwen-7b' },
    settings,
    ...over,
  };
}

export interface ContractCase {
  engine: Engine;
  /** How many nodes one replica of this engine may span. */
  maxNodes: number;
  /** Where the engine is given its key: the environment, the command line (said in the engine), or nowhere. */
  key: 'env' | 'args' | 'none';
  /** The profile keys that put a replica on two cards of a node. */
  twoCards: Partial<ProfileSpec>;
  /** A flag the engine writes itself, and a value a profile gives it instead. */
  ownFlag: { name: string; value: string };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function flagCount(args: readonly string[], name: string): number {
  return args.filter((a) => a === name || a.startsWith(`${name}=`)).length;
}

export function engineContract(c: ContractCase): void {
  const name = c.engine.name;
  const at = (over: Partial<ShardLaunch> = {}) => launch(name, over);

  describe(`${name}: the engine contract`, () => {
    it('gives the API host and port only to ranks that serve HTTP, and rank 0 always serves it', () => {
      const ranks = c.maxNodes;
      expect(c.engine.servesHttp(0, ranks)).toBe(true);
      for (let rank = 0; rank < ranks; rank++) {
        const l = at({
          rank,
          ranks,
          profile: profile(name, { nodes: ranks, tp: ranks, gpus_per_node: 1 }),
          ...(ranks > 1 ? { head: { address: '10.0.0.1', port: 29500 } } : {}),
        });
        const args = c.engine.commands(l).flatMap((p) => p.args);
        const serves = c.engine.servesHttp(rank, ranks);
        expect(args.includes('--port'), `rank ${rank} of ${ranks}`).toBe(serves);
        if (serves) expect(args[args.indexOf('--port') + 1]).toBe('18080');
      }
    });

    it(`takes its key ${c.key === 'env' ? 'from the environment, never the command line' : c.key === 'args' ? 'on the command line (no variable exists)' : 'nowhere'}`, () => {
      const [p] = c.engine.commands(at());
      expect(p).toBeDefined();
      if (p === undefined) return;
      const inArgs = p.args.some((a) => a.includes(apiKey));
      const inEnv = Object.values(p.env).includes(apiKey);
      expect(inArgs).toBe(c.key === 'args');
      expect(inEnv).toBe(c.key === 'env');
    });

    it('pins CUDA to the devices by UUID, in placement order', () => {
      const devices = [cards[3], cards[1]].filter((d) => d !== undefined);
      const [p] = c.engine.commands(at({ devices, profile: profile(name, c.twoCards) }));
      expect(p?.env['CUDA_VISIBLE_DEVICES']).toBe(`${cards[3]?.uuid},${cards[1]?.uuid}`);
    });

    it('runs on one MIG instance by its MIG UUID, with no Vulkan device list', () => {
      const [p] = c.engine.commands(
        at({ devices: [migInstance], profile: profile(name, { gpu_class: migInstance.class }) }),
      );
      expect(p?.env['CUDA_VISIBLE_DEVICES']).toBe(migInstance.uuid);
      expect(p?.env).not.toHaveProperty('GGML_VK_VISIBLE_DEVICES');
      expect(c.engine.validate(profile(name, { gpu_class: migInstance.class }), [migInstance])).toEqual([]);
    });

    it('refuses more than one MIG instance, in validate and in commands', () => {
      const two = [
        migInstance,
        { ...migInstance, id: 1202, label: '2/mig2', uuid: 'MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4' },
      ];
      const p = profile(name, { gpu_class: migInstance.class });
      expect(c.engine.validate(p, two).join('\n')).toContain('place it on one instance');
      expect(() => c.engine.commands(at({ devices: two, profile: p }))).toThrow(/exactly one instance/);
    });

    for (const spelling of ['--flag value', '--flag=value'] as const) {
      it(`lets the profile's ${c.ownFlag.name} win (${spelling}), and puts the profile's args last`, () => {
        const own =
          spelling === '--flag value'
            ? [c.ownFlag.name, c.ownFlag.value]
            : [`${c.ownFlag.name}=${c.ownFlag.value}`];
        const args = [...own, '--some-engine-flag', 'x'];
        const defaults = c.engine.commands(at())[0]?.args ?? [];
        expect(
          flagCount(defaults, c.ownFlag.name),
          'the engine writes the flag itself when the profile does not',
        ).toBe(1);
        const [p] = c.engine.commands(at({ profile: profile(name, { args }) }));
        expect(flagCount(p?.args ?? [], c.ownFlag.name)).toBe(1);
        expect(p?.args.slice(-args.length)).toEqual(args);
      });
    }

    it("passes the profile's environment, under what placement and the gateway set", () => {
      const [p] = c.engine.commands(
        at({ profile: profile(name, { env: { HF_HOME: '/cache/hf', NCCL_DEBUG: 'INFO' } }) }),
      );
      expect(p?.env).toMatchObject({ HF_HOME: '/cache/hf', NCCL_DEBUG: 'INFO' });
    });

    it('accepts the devices of its own launch, and names what to change when they do not fit', () => {
      expect(c.engine.validate(profile(name), cards.slice(0, 1))).toEqual([]);
      expect(c.engine.validate(profile(name, c.twoCards), cards.slice(0, 2))).toEqual([]);
      expect(c.engine.validate(profile(name), cards.slice(0, 2)).join('\n')).toContain(
        'write gpus_per_node: 2',
      );
      const l4 = { ...cards[0], class: 'l4-24g' } as ShardDevice;
      expect(c.engine.validate(profile(name), [l4]).join('\n')).toContain('write gpu_class: l4-24g');
    });

    it('builds commands from the launch alone: the same launch gives the same commands, and is left as it was', () => {
      const l = deepFreeze(
        at({
          profile: profile(name, {
            ...c.twoCards,
            adapters: name === 'trtllm' ? [] : [{ name: 'sql', path: '/adapters/sql' }],
          }),
          devices: cards.slice(0, 2),
        }),
      );
      expect(c.engine.commands(l)).toEqual(c.engine.commands(l));
    });

    it('starts the configured executable', () => {
      const [p] = c.engine.commands(at());
      expect(p?.bin).toBe(settings.bin);
      const other = '/srv/other/serve';
      expect(c.engine.commands(at({ settings: { ...settings, bin: other } }))[0]?.bin).toBe(other);
    });
  });
}
