import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import type { NodeInventory } from '../../gpu/types.js';
import type { NodeRecord, Store } from '../../store/store.js';

import { NodeRegistry } from './node-registry.js';

// Liveness as each control plane judges it: a node whose agent talks to another control
// plane is heard of only through the store (that one's flush, this one's reload).

const inventory: NodeInventory = {
  host: {
    hostname: 'n',
    os: 'linux',
    arch: 'x64',
    cpus: { count: 4, model: 'cpu' },
    memory: { total_mib: 1000, free_mib: 500 },
    disk: { path: '/', total_mib: 1000, free_mib: 500 },
  },
  gpu: { method: 'none', reasons: [], cards: [] },
  agent_version: '0.0.0',
  address: '127.0.0.1',
};

function record(id: string, lastSeen: number): NodeRecord {
  const at = new Date(lastSeen).toISOString();
  return {
    id,
    name: id,
    joined_at: at,
    joined_with: 't',
    address: '127.0.0.1',
    agent_version: '0.0.0',
    inventory,
    inventory_at: at,
    last_seen_at: at,
  };
}

describe('node liveness', () => {
  it('holds a node of another control plane to twice the grace, one connected here to the grace', async () => {
    let now = 1_000_000;
    // heartbeat 1 s, 3 missed: grace 3 s. The other control plane last wrote `remote` at the start.
    const rows = [record('remote', now)];
    const store = {
      nodes: { list: () => Promise.resolve(rows), touch: () => Promise.resolve() },
    } as unknown as Store;
    const registry = new NodeRegistry({
      store,
      logger: pino({ level: 'silent' }),
      heartbeatMs: 1000,
      now: () => now,
    });
    await registry.start();
    registry.connected(record('here', now));
    const state = (name: string) => registry.view(name)?.state;
    now += 4000; // past the grace, within twice it
    registry.sweep();
    expect([state('here'), state('remote')]).toEqual(['not_ready', 'ready']);
    now += 2500; // past twice the grace
    registry.sweep();
    expect(state('remote')).toBe('not_ready');
    expect(registry.view('remote')?.reason).toMatch(/^no heartbeat since .*: its agent is not connected$/);
    await registry.stop();
  });
});
