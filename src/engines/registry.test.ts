import { describe, expect, it } from 'vitest';

import { engineNames } from '../catalog/model-spec.js';

import { engineFor, engines } from './registry.js';

describe('engine registry', () => {
  it('has one engine per catalog engine name, in that order', () => {
    expect(engines.map((e) => e.name)).toEqual([...engineNames]);
    for (const name of engineNames) expect(engineFor(name).name).toBe(name);
  });

  it('describes each engine completely', () => {
    for (const e of engines) {
      expect(e.healthPath).toMatch(/^\//);
      expect(e.metricsPath).toMatch(/^\//);
      expect(e.loadMetrics.running).not.toBe('');
      expect(e.loadMetrics.waiting).not.toBe('');
      expect(['answers-503', 'refuses-connections']).toContain(e.loading);
    }
  });
});
