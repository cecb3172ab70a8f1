import { describe, expect, it } from 'vitest';

import { isLlmgwError } from '../core/errors.js';

import { engineFor, engineNames, engines, knownEngine } from './registry.js';

describe('engine registry', () => {
  it('names each engine once, in the order plans list them', () => {
    expect(engineNames).toEqual(['llamacpp', 'vllm', 'sglang', 'trtllm']);
    expect(engines.map((e) => e.name)).toEqual(engineNames);
    for (const name of engineNames) expect(engineFor(name).name).toBe(name);
  });

  it('refuses a name it does not know, saying the ones it does', () => {
    let thrown: unknown;
    try {
      engineFor('tgi');
    } catch (e) {
      thrown = e;
    }
    expect(isLlmgwError(thrown) && thrown.message).toBe(
      'no engine "tgi": llmgw knows llamacpp, vllm, sglang, trtllm',
    );
  });

  it('tells ctl of an engine it does not know, rather than throwing', () => {
    expect(knownEngine('vllm')?.label).toBe('vLLM');
    expect(knownEngine('tgi')).toBeUndefined();
  });

  it('describes each engine completely', () => {
    for (const e of engines) {
      expect(e.healthPath).toMatch(/^\//);
      expect(e.metricsPath).toMatch(/^\//);
      expect(e.loadMetrics.running).not.toBe('');
      expect(e.loadMetrics.waiting).not.toBe('');
      expect(['answers-503', 'refuses-connections']).toContain(e.loading);
      expect(e.label).not.toBe('');
      expect(e.formats.length).toBeGreaterThan(0);
      expect(e.imageExecutable).not.toBe('');
    }
  });
});
