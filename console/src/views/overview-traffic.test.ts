import { describe, expect, it } from 'vitest';

import type { TrafficPoint, TrafficView } from '../../../src/protocol/traffic-views.js';
import { millis, rate, trafficSummary } from './overview-traffic.js';

const point = (o: Partial<TrafficPoint>): TrafficPoint => ({
  t: '2026-12-03T13:00:00.000Z',
  requests_per_s: 0,
  prompt_tokens_per_s: 0,
  completion_tokens_per_s: 0,
  ttft_p50_ms: null,
  ttft_p95_ms: null,
  errors_per_s: 0,
  ...o,
});
const view = (points: TrafficPoint[]): TrafficView => ({ step_s: 10, gateway: true, points, models: {} });

describe('trafficSummary', () => {
  it('is empty (dashes) before the first step', () => {
    expect(trafficSummary(view([]))).toEqual({
      requestsPerS: { now: null, hour: null },
      tokensPerS: { now: null, hour: null },
      ttftP50Ms: { now: null, hour: null },
      ttftP95Ms: { now: null, hour: null },
      errorsPerS: { now: null, hour: null },
      minutes: 0,
    });
  });

  it('gives the last step now, the mean rate over the hour, and latencies weighted by requests', () => {
    const s = trafficSummary(
      view([
        point({
          requests_per_s: 3,
          prompt_tokens_per_s: 30,
          completion_tokens_per_s: 90,
          ttft_p50_ms: 100,
          ttft_p95_ms: 300,
        }),
        // A quiet step: no latency, and it does not pull the hour's down.
        point({}),
        point({
          requests_per_s: 1,
          completion_tokens_per_s: 20,
          ttft_p50_ms: 500,
          ttft_p95_ms: 900,
          errors_per_s: 0.3,
        }),
      ]),
    );
    expect(s.requestsPerS).toEqual({ now: 1, hour: 4 / 3 });
    expect(s.tokensPerS).toEqual({ now: 20, hour: 140 / 3 });
    expect(s.ttftP50Ms).toEqual({ now: 500, hour: (100 * 3 + 500) / 4 });
    expect(s.ttftP95Ms).toEqual({ now: 900, hour: (300 * 3 + 900) / 4 });
    expect(s.errorsPerS.now).toBe(0.3);
    expect(s.errorsPerS.hour).toBeCloseTo(0.1, 10);
    expect(s.minutes).toBe(1);
  });
});

describe('figures as people read them', () => {
  it.each([
    [null, '–'],
    [0, '0'],
    [0.0333, '0.03'],
    [3.24, '3.2'],
    [118.4, '118'],
  ])('rate %s is %s', (n, text) => {
    expect(rate(n)).toBe(text);
  });

  it('rounds milliseconds', () => {
    expect(millis(412.6)).toBe('413 ms');
    expect(millis(null)).toBe('–');
  });
});
