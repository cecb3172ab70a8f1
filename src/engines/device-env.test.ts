import { describe, expect, it } from 'vitest';

import { cudaVisibleDevices, onMig, shardEnv } from './device-env.js';
import { cards, migInstance, profile } from './engine.contract.js';

describe('device environment', () => {
  it('names cards by UUID, in the order given', () => {
    expect(cudaVisibleDevices([cards[2], cards[0]].filter((c) => c !== undefined))).toBe(
      `${cards[2]?.uuid},${cards[0]?.uuid}`,
    );
  });

  it('hides every card from a CPU shard', () => {
    expect(cudaVisibleDevices([])).toBe('');
  });

  it('names a MIG instance by its MIG UUID, and refuses two', () => {
    expect(onMig([migInstance])).toBe(true);
    expect(onMig(cards)).toBe(false);
    expect(cudaVisibleDevices([migInstance])).toBe(migInstance.uuid);
    expect(() => cudaVisibleDevices([migInstance, { ...migInstance, uuid: 'MIG-other' }])).toThrow(
      'a shard on MIG runs on exactly one instance, but was given 2 (2/mig1, 2/mig1): place it on one instance',
    );
  });

  it("puts the profile's environment under llmgw's own", () => {
    const env = shardEnv(
      {
        profile: profile('vllm', { env: { A: '1', CUDA_VISIBLE_DEVICES: 'x' } }),
        devices: cards.slice(0, 1),
      },
      { KEY: 'k' },
    );
    expect(env).toEqual({ A: '1', CUDA_VISIBLE_DEVICES: cards[0]?.uuid, KEY: 'k' });
  });
});
