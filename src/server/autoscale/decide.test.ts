import { describe, expect, it } from 'vitest';

import type { GatewayLoadReport } from '../../protocol/load-report.js';

import { decide, modelLoad, type DecideInput, type ModelLoad } from './decide.js';

const now = 1_000_000;
const spec = { min: 1, max: 5, target: 0.5, idle_s: 60 };
const replica = (id: string, running: number, waiting = 0, kvUsage?: number) => ({
  id,
  running,
  waiting,
  capacity: 4,
  ...(kvUsage === undefined ? {} : { kvUsage }),
});
const load = (replicas: ModelLoad['replicas'], queued = 0, inFlight = 0): ModelLoad => ({
  replicas,
  queued,
  inFlight,
});
const base: DecideInput = {
  spec,
  current: 2,
  load: load([replica('a', 2), replica('b', 2)]),
  lastRequestAt: now - 1000,
  lastChangeAt: now - 600_000,
  now,
  rolling: false,
  recommendations: [],
  settings: { scaleDownWindowMs: 300_000, scaleUpStep: 2 },
};

/** What changes from `base`, the count and direction expected, and words of the reason. */
const table: [string, Partial<DecideInput>, number, string | undefined, string][] = [
  ['at target: held', {}, 2, undefined, 'load 1 over 2 replicas (0.5 each, target 0.5)'],
  [
    'slots full: up',
    { load: load([replica('a', 4), replica('b', 3, 1)]) },
    4,
    'up',
    'load 2 over 2 replicas (1 each, target 0.5): wants 4',
  ],
  [
    'the queue counts, spread over a replica’s slots',
    { load: load([replica('a', 2), replica('b', 2)], 4) },
    4,
    'up',
    'load 2 over 2 replicas',
  ],
  [
    'KV use counts where it is above the slots busy',
    { load: load([replica('a', 1, 0, 0.9), replica('b', 1, 0, 0.9)]) },
    4,
    'up',
    'wants 4',
  ],
  ['up by at most the step', { load: load([replica('a', 4)], 20), current: 1 }, 3, 'up', 'wants 5'],
  ['never above max', { load: load([replica('a', 4), replica('b', 4)], 100), current: 5 }, 5, undefined, ''],
  [
    'low load within the window: held',
    { load: load([replica('a', 0), replica('b', 1)]), lastChangeAt: now - 10_000 },
    2,
    undefined,
    'waiting out the scale-down window',
  ],
  [
    'low load after a quiet window: down',
    { load: load([replica('a', 0), replica('b', 1)]) },
    1,
    'down',
    '1 wanted at most over the last 300 s',
  ],
  [
    'down only to the highest count wanted over the window',
    {
      current: 4,
      load: load([replica('a', 0), replica('b', 1)]),
      recommendations: [
        { at: now - 100_000, desired: 3 },
        { at: now - 400_000, desired: 4 },
      ],
    },
    3,
    'down',
    '3 wanted at most',
  ],
  [
    'never below min',
    { spec: { ...spec, min: 2 }, load: load([replica('a', 0), replica('b', 0)]) },
    2,
    undefined,
    '',
  ],
  [
    'held while a rolling change runs',
    { rolling: true, load: load([replica('a', 4), replica('b', 4)], 10) },
    2,
    undefined,
    'a rolling change of the model runs',
  ],
  ['into new bounds: max lowered', { spec: { ...spec, max: 1 } }, 1, 'down', 'above max 1'],
  ['into new bounds: min raised', { spec: { ...spec, min: 3 } }, 3, 'up', 'below min 3'],
  [
    'min 0, idle past idle_s: to zero',
    { spec: { ...spec, min: 0 }, lastRequestAt: now - 61_000, load: load([replica('a', 0)]) },
    0,
    'zero',
    'no request for 61 s (idle_s: 60)',
  ],
  [
    'min 0, idle but a request in flight: kept',
    {
      spec: { ...spec, min: 0 },
      current: 1,
      lastRequestAt: now - 61_000,
      load: load([replica('a', 1)], 0, 1),
    },
    1,
    undefined,
    '',
  ],
  [
    'min 1, idle: never to zero',
    { lastRequestAt: now - 3_600_000, load: load([replica('a', 0), replica('b', 0)]) },
    1,
    'down',
    '',
  ],
  [
    'min 0, idle since the last change when no request was ever seen',
    { spec: { ...spec, min: 0 }, lastRequestAt: undefined, lastChangeAt: now - 30_000, load: undefined },
    2,
    undefined,
    'no load figures',
  ],
  [
    'at zero with a request waiting: one starts',
    { spec: { ...spec, min: 0 }, current: 0, load: load([], 3) },
    1,
    'wake',
    '3 requests waiting at zero',
  ],
  [
    'at zero, nothing waiting: held',
    { spec: { ...spec, min: 0 }, current: 0, load: load([], 0) },
    0,
    undefined,
    'at zero',
  ],
  [
    'just woken, its replica starting, the waking request queued: held',
    { spec: { ...spec, min: 0 }, current: 1, lastChangeAt: now - 500, load: load([], 1) },
    1,
    undefined,
    'no replica reports figures yet (starting)',
  ],
  [
    'no report from any gateway: held',
    { load: undefined },
    2,
    undefined,
    'no load figures from the gateways',
  ],
];

describe('the autoscaler’s decision', () => {
  it.each(table)('%s', (_what, change, replicas, direction, words) => {
    const d = decide({ ...base, ...change });
    expect(d.replicas).toBe(replicas);
    expect(d.direction).toBe(direction);
    expect(d.reason).toContain(words);
    expect(d.figures['replicas']).toBe(change.current ?? base.current);
  });

  it('remembers the count wanted now, not the step taken', () => {
    const d = decide({ ...base, current: 1, load: load([replica('a', 4)], 20) });
    expect(d.recommendation).toBe(5);
    expect(d.figures).toMatchObject({ queued: 20, desired: 5, target: 0.5 });
  });
});

describe('a model’s load over the gateways', () => {
  const report = (gateway: string, m: Partial<GatewayLoadReport['models'][number]>): GatewayLoadReport => ({
    gateway,
    at: now,
    models: [{ model: 'm', queued: 0, inFlight: 0, requests: 0, replicas: [], ...m }],
  });
  const r = (id: string, o: Partial<GatewayLoadReport['models'][number]['replicas'][number]>) => ({
    id,
    running: 0,
    waiting: 0,
    capacity: 4,
    inFlight: 0,
    stale: false,
    ...o,
  });

  it('takes the engine’s reading once, adds queues and in-flight requests, keeps the latest request and cold start', () => {
    const l = modelLoad(
      [
        report('g1', {
          queued: 2,
          inFlight: 3,
          lastRequestAt: now - 50,
          coldStart: { ms: 900, at: now - 10 },
          replicas: [
            r('a', { running: 3, waiting: 1, inFlight: 2, kvUsage: 0.4 }),
            r('b', { stale: true, inFlight: 1 }),
          ],
        }),
        report('g2', {
          queued: 1,
          inFlight: 2,
          lastRequestAt: now - 5,
          coldStart: { ms: 400, at: now - 500 },
          replicas: [r('a', { running: 3, waiting: 1, inFlight: 1 }), r('b', { stale: true, inFlight: 1 })],
        }),
      ],
      'm',
    );
    expect(l).toEqual({
      queued: 3,
      inFlight: 5,
      lastRequestAt: now - 5,
      coldStart: { ms: 900, at: now - 10 },
      replicas: [
        { id: 'a', running: 3, waiting: 1, capacity: 4, kvUsage: 0.4 },
        // No fresh engine reading: the gateways' own requests on it.
        { id: 'b', running: 2, waiting: 0, capacity: 4 },
      ],
    });
  });

  it('is undefined for a model no gateway reported', () => {
    expect(modelLoad([report('g1', {})], 'other')).toBeUndefined();
  });
});
