import { describe, expect, it } from 'vitest';

import { ModelDemand } from './load-figures.js';
import type { ReplicaLoad } from './router/types.js';

describe('the load report', () => {
  it('has every catalog model, the router’s replicas, the waiting room as queued, requests and the last cold start', () => {
    const d = new ModelDemand();
    d.requested('chat', 1000);
    d.requested('chat', 2000);
    d.requested('cold', 1500);
    d.coldStart('cold', 41_234.6, 1600);
    const loads: ReplicaLoad[] = [
      {
        id: 'chat-1',
        model: 'chat',
        inFlight: 3,
        stale: false,
        breaker: 'closed',
        score: 5,
        capacity: 8,
        reading: { running: 4, waiting: 1, kvUsage: 0.5, at: 0 },
      },
      { id: 'chat-2', model: 'chat', inFlight: 0, stale: true, breaker: 'open', score: 1e6 },
      // A replica whose model left the catalog is still reported while it serves.
      { id: 'old-1', model: 'old', inFlight: 1, stale: false, breaker: 'closed', score: 1, capacity: 2 },
    ];
    const report = d.report(
      {
        gateway: 'gw',
        catalog: ['chat', 'cold', 'idle'],
        loads,
        queued: (m) => (m === 'chat' ? 2 : 0),
        waiting: (m) => (m === 'cold' ? 5 : 0),
        inFlight: (m) => loads.filter((l) => l.model === m).reduce((n, l) => n + l.inFlight, 0),
      },
      3000,
    );
    expect(report).toEqual({
      gateway: 'gw',
      at: 3000,
      models: [
        {
          model: 'chat',
          queued: 2,
          inFlight: 3,
          requests: 2,
          lastRequestAt: 2000,
          replicas: [
            { id: 'chat-1', running: 4, waiting: 1, kvUsage: 0.5, capacity: 8, inFlight: 3, stale: false },
            { id: 'chat-2', running: 0, waiting: 0, capacity: 1, inFlight: 0, stale: true },
          ],
        },
        {
          model: 'cold',
          queued: 5,
          inFlight: 0,
          requests: 1,
          lastRequestAt: 1500,
          coldStart: { ms: 41_235, at: 1600 },
          replicas: [],
        },
        { model: 'idle', queued: 0, inFlight: 0, requests: 0, replicas: [] },
        {
          model: 'old',
          queued: 0,
          inFlight: 1,
          requests: 0,
          replicas: [{ id: 'old-1', running: 0, waiting: 0, capacity: 2, inFlight: 1, stale: false }],
        },
      ],
    });
  });
});
