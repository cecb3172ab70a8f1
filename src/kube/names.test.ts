import { describe, expect, it } from 'vitest';

import { dnsLabel, labelValue, specHash, workloadName } from './names.js';

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
    expect(workloadName('m'.repeat(70), 'a')).not.toBe(workloadName('m'.repeat(70), 'b'));
  });

  it('names the workload llmgw-<model>-<profile>', () => {
    expect(workloadName('qwen', 'h100')).toBe('llmgw-qwen-h100');
    expect(workloadName('Qwen2.5-72B-Instruct', 'tp4-on-h100-80g-with-a-long-profile-name')).toMatch(dns1123);
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
