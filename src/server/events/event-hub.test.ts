import { afterEach, describe, expect, it, vi } from 'vitest';

import { EventHub, topicsFor, type EventData, type EventTopic } from './event-hub.js';

describe('topicsFor', () => {
  it.each([
    ['admin', ['nodes', 'replicas', 'models', 'rollouts', 'traffic', 'keys', 'config', 'usage']],
    ['user', ['nodes', 'replicas', 'models', 'rollouts', 'traffic']],
    ['gateway', ['nodes', 'replicas', 'models', 'rollouts', 'traffic']],
    ['metrics', []],
  ] as const)('%s follows %j', (role, topics) => {
    expect(topicsFor(role)).toEqual(topics);
  });
});

describe('EventHub', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const record = (hub: EventHub, topics: EventTopic[]) => {
    const got: [EventTopic, EventData][] = [];
    const closed = { count: 0 };
    const unsubscribe = hub.subscribe(
      topics,
      (t, d) => got.push([t, d]),
      () => closed.count++,
    );
    return { got, closed, unsubscribe };
  };

  it('sends a topic only to those following it', () => {
    const hub = new EventHub({ minGapMs: 0 });
    const admin = record(hub, ['keys', 'models']);
    const user = record(hub, ['models']);
    hub.publish('keys', { keys: ['k'] });
    hub.publish('models');
    expect(admin.got).toEqual([
      ['keys', { keys: ['k'] }],
      ['models', {}],
    ]);
    expect(user.got).toEqual([['models', {}]]);
  });

  it('sends the first event of a topic at once, merges those within the gap into one after it', () => {
    vi.useFakeTimers();
    let now = 1000;
    const hub = new EventHub({ minGapMs: 250, now: () => now });
    const s = record(hub, ['replicas', 'nodes']);
    hub.publish('replicas', { replicas: ['b'] });
    hub.publish('replicas', { replicas: ['a', 'b'], models: ['m'] });
    hub.publish('replicas', { replicas: ['c'] });
    hub.publish('nodes', { nodes: ['n1'] });
    expect(s.got).toEqual([
      ['replicas', { replicas: ['b'] }],
      ['nodes', { nodes: ['n1'] }],
    ]);
    now += 250;
    vi.advanceTimersByTime(250);
    expect(s.got.slice(2)).toEqual([['replicas', { replicas: ['a', 'b', 'c'], models: ['m'] }]]);
    // Nothing pending: no event at the next gap.
    now += 1000;
    vi.advanceTimersByTime(1000);
    expect(s.got).toHaveLength(3);
  });

  it('at most one event per topic per gap, however many are published', () => {
    vi.useFakeTimers();
    let now = 0;
    const hub = new EventHub({ minGapMs: 250, now: () => now });
    const s = record(hub, ['replicas']);
    for (let i = 0; i < 100; i++) {
      hub.publish('replicas', { replicas: [`r${i % 3}`] });
      now += 10;
      vi.advanceTimersByTime(10);
    }
    // 1 s of publishing every 10 ms: the first at once, then one per 250 ms.
    expect(s.got.length).toBeLessThanOrEqual(5);
    expect(s.got.length).toBeGreaterThanOrEqual(4);
  });

  it('stops sending to one that unsubscribed, and forgets it', () => {
    const hub = new EventHub({ minGapMs: 0 });
    const s = record(hub, ['models']);
    expect(hub.size).toBe(1);
    s.unsubscribe();
    expect(hub.size).toBe(0);
    hub.publish('models');
    expect(s.got).toEqual([]);
  });

  it('close ends every subscription, drops pending events, and refuses later ones', () => {
    vi.useFakeTimers();
    let now = 0;
    const hub = new EventHub({ minGapMs: 250, now: () => now });
    const s = record(hub, ['models']);
    hub.publish('models');
    hub.publish('models');
    hub.close();
    expect(s.closed.count).toBe(1);
    expect(hub.size).toBe(0);
    now += 1000;
    vi.advanceTimersByTime(1000);
    expect(s.got).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
    const late = record(hub, ['models']);
    expect(late.closed.count).toBe(1);
    expect(hub.size).toBe(0);
  });
});
