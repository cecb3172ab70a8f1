import { describe, expect, it } from 'vitest';

import type { ModelCounts } from '../../protocol/traffic-views.js';

import { TrafficSampler } from './traffic-sampler.js';

const counts = (requests: number): ModelCounts => ({
  requests,
  errors: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  ttft: { bounds: [1], counts: [0, 0] },
});

describe('TrafficSampler', () => {
  it('keeps the last `capacity` points, per model and in total; requests that named no model in the total only', () => {
    let now = 0;
    let n = 0;
    const s = new TrafficSampler({ stepMs: 10_000, capacity: 3, now: () => now });
    expect(s.view()).toEqual({ step_s: 10, gateway: false, points: [], models: {} });
    s.attach(
      () =>
        new Map([
          ['chat', counts(n * 10)],
          ['-', counts(n)],
        ]),
    );
    s.stop();
    // The first reading is the baseline: no point yet.
    expect(s.view().points).toEqual([]);
    for (let i = 1; i <= 5; i++) {
      n = i;
      now = i * 10_000;
      s.sample();
    }
    const v = s.view();
    expect(v.gateway).toBe(true);
    expect(v.points.map((p) => p.t)).toEqual([
      '1970-01-01T00:00:30.000Z',
      '1970-01-01T00:00:40.000Z',
      '1970-01-01T00:00:50.000Z',
    ]);
    expect(v.points.map((p) => p.requests_per_s)).toEqual([1.1, 1.1, 1.1]);
    expect(Object.keys(v.models)).toEqual(['chat']);
    expect(v.models['chat']?.map((p) => p.requests_per_s)).toEqual([1, 1, 1]);
  });

  it('a reading at the same instant adds no point (no division by zero)', () => {
    const s = new TrafficSampler({ now: () => 5 });
    s.attach(() => new Map([['chat', counts(1)]]));
    s.stop();
    s.sample();
    expect(s.view().points).toEqual([]);
  });
});
