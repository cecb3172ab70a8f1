import { describe, expect, it } from 'vitest';

import { dnsLabel, labelValue, maxLeaderWorkerSetName, specHash, workloadName } from './names.js';

const dns1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

describe('dnsLabel', () => {
  it.each([
    ['qwen', 'qwen'],
    ['Qwen', 'qwen'],
    ['llmgw-qwen2-7b-h100', 'llmgw-qwen2-7b-h100'],
  ])('%s stays %s (only case changed)', (text, want) => {
    expect(dnsLabel(text)).toBe(want);
  });

  it.each([
    ['qwen2.5-7b', /^qwen2-5-7b-[0-9a-f]{8}$/],
    ['org/Model_Name', /^org-model-name-[0-9a-f]{8}$/],
    ['--', /^x-[0-9a-f]{8}$/],
    ['a'.repeat(80), /^a{54}-[0-9a-f]{8}$/],
  ])('%s is folded and hashed', (text, want) => {
    const label = dnsLabel(text);
    expect(label).toMatch(want);
    expect(label).toMatch(dns1123);
    expect(label.length).toBeLessThanOrEqual(63);
  });

  it('keeps names apart that fold alike', () => {
    expect(dnsLabel('qwen2.5')).not.toBe(dnsLabel('qwen2_5'));
    const one = { name: 'a', nodes: 1 };
    expect(workloadName('m'.repeat(70), one)).not.toBe(workloadName('m'.repeat(70), { ...one, name: 'b' }));
  });

  it('names the workload llmgw-<model>-<profile>', () => {
    expect(workloadName('qwen', { name: 'h100', nodes: 1 })).toBe('llmgw-qwen-h100');
    expect(
      workloadName('Qwen2.5-72B-Instruct', { name: 'tp4-on-h100-80g-with-a-long-profile-name', nodes: 1 }),
    ).toMatch(dns1123);
  });
});

describe('workloadName: within what each kind’s controllers extend', () => {
  // The catalog holds model and profile names to DNS labels of at most 63 (src/core/names.ts).
  const longest = 'a'.repeat(62) + '1';
  const dns1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
  // A LeaderWorkerSet's worker StatefulSet of group G labels its pods `<lws>-<G>-<hash of ≤ 10>`.
  const revisionLabel = (lws: string) => `${lws}-9999-${'4'.repeat(10)}`;

  it.each([
    // [model, profile, nodes, the longest it may be]
    [longest, longest, 1, 63],
    [longest, longest, 2, 47],
    ['llama-3-1-405b-instruct-fp8-with-a-longer-suffix', 'h100-2node', 2, 47],
    ['llama-3-1-405b-instruct-fp8-with-a-longer-suffix', 'h100-2node', 1, 63],
  ])('%s / %s on %i node(s): at most %i, cut with a hash', (model, profile, nodes, max) => {
    const name = workloadName(model, { name: profile, nodes });
    expect(name.length).toBeLessThanOrEqual(max);
    expect(name).toMatch(/-[0-9a-f]{8}$/);
    expect(name).toMatch(dns1123);
    expect(name.startsWith('llmgw-')).toBe(true);
    // Stable: the same object on every pass and every control plane.
    expect(workloadName(model, { name: profile, nodes })).toBe(name);
    if (nodes > 1) {
      expect(name).toMatch(dns1035);
      expect(revisionLabel(name).length).toBeLessThanOrEqual(63);
      expect(`${name}-9999-99`.length).toBeLessThanOrEqual(63);
    }
  });

  it('keeps a name that fits as it is, the model’s and profile’s names in full', () => {
    const name = workloadName('llama-3-1-405b-instruct-fp8', { name: 'h100-2node', nodes: 2 });
    expect(name).toBe('llmgw-llama-3-1-405b-instruct-fp8-h100-2node');
    expect(revisionLabel(name).length).toBeLessThanOrEqual(63);
    const atLimit = `m${'x'.repeat(maxLeaderWorkerSetName - 'llmgw-m-p'.length)}`;
    expect(workloadName(atLimit, { name: 'p', nodes: 2 })).toBe(`llmgw-${atLimit}-p`);
    expect(workloadName(`${atLimit}x`, { name: 'p', nodes: 2 })).not.toBe(`llmgw-${atLimit}x-p`);
  });

  it('keeps the longest names apart that differ only past the cut', () => {
    const a = workloadName(`${longest.slice(0, 62)}2`, { name: longest, nodes: 2 });
    expect(a).not.toBe(workloadName(longest, { name: longest, nodes: 2 }));
  });
});

describe('labelValue', () => {
  it.each([
    ['qwen2.5-7b', 'qwen2.5-7b'],
    ['Qwen_2', 'Qwen_2'],
  ])('%s is a label value as it is', (text, want) => {
    expect(labelValue(text)).toBe(want);
  });
  it('folds what is not one', () => {
    expect(labelValue('org/model')).toMatch(/^org-model-[0-9a-f]{8}$/);
  });
});

describe('specHash', () => {
  it('does not depend on key order, and changes with a value', () => {
    expect(specHash({ a: 1, b: [1, { c: 2, d: 3 }] })).toBe(specHash({ b: [1, { d: 3, c: 2 }], a: 1 }));
    expect(specHash({ a: 1 })).not.toBe(specHash({ a: 2 }));
    expect(specHash({ a: 1, u: undefined })).toBe(specHash({ a: 1 }));
  });
});
