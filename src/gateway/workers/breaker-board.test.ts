import { describe, expect, it } from 'vitest';

import { routeReplica } from '../../../test/support/route-replica.js';
import type { BreakerSnapshot } from '../router/breaker.js';
import { Router } from '../router/router.js';
import type { RouteReplica } from '../../protocol/routes.js';

import { BreakerBoard } from './breaker-board.js';

const replica = (id: string): RouteReplica => routeReplica(id);

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('BreakerBoard', () => {
  it('tells every process a breaker that evidence changed, once per turn, and nothing when it changed nothing', async () => {
    let clock = 0;
    const told: Map<string, BreakerSnapshot>[] = [];
    const board = new BreakerBoard(
      (states) => told.push(states),
      () => clock,
    );
    board.setReplicas([replica('a'), replica('b')]);
    board.evidence('a', { kind: 'failed', needsRequest: false });
    // Another process's failure of the same incident: no second opening.
    board.evidence('a', { kind: 'failed', needsRequest: false });
    board.evidence('b', { kind: 'succeeded', trial: false });
    await turn();
    expect(told).toEqual([
      new Map([['a', { open: true, leftMs: 1000, openings: 1, needsRequest: false, refusedBy: [] }]]),
    ]);
    expect(board.states()).toEqual([
      { replica: 'a', model: 'm', state: 'open' },
      { replica: 'b', model: 'm', state: 'closed' },
    ]);
    clock = 1000;
    expect(board.states()[0]?.state).toBe('half-open');
    board.evidence('a', { kind: 'answered' });
    await turn();
    expect(told[1]?.get('a')).toMatchObject({ open: false, openings: 1 });
  });

  it('counts the keys refused across processes: three, each seen by another worker, open it', async () => {
    const told: Map<string, BreakerSnapshot>[] = [];
    const board = new BreakerBoard(
      (states) => told.push(states),
      () => 0,
    );
    board.setReplicas([replica('a')]);
    for (const key of ['k1', 'k2', 'k3']) board.evidence('a', { kind: 'refused', key });
    await turn();
    expect(told.at(-1)?.get('a')).toMatchObject({ open: true, refusedBy: ['k1', 'k2', 'k3'] });
  });

  it('forgets replicas gone from the routes, and gives a process started later every state', () => {
    const board = new BreakerBoard(
      () => undefined,
      () => 0,
    );
    board.setReplicas([replica('a'), replica('b')]);
    board.evidence('b', { kind: 'failed', needsRequest: true });
    expect([...board.snapshots().keys()]).toEqual(['a', 'b']);
    expect(board.snapshots().get('b')).toMatchObject({ open: true, needsRequest: true });
    board.setReplicas([replica('b')]);
    expect(board.states().map((s) => s.replica)).toEqual(['b']);
  });
});

describe('a router following the board', () => {
  it('tells the evidence that changed its breakers, and adopts the states it is told', async () => {
    let clock = 0;
    const seen: string[] = [];
    const worker = new Router({ now: () => clock });
    worker.setReplicas([replica('a'), replica('b')]);
    worker.onBreakerEvidence((id, e) => seen.push(`${id}:${e.kind}`));
    // A success that changes nothing says nothing: the hot path costs no message.
    (await worker.acquire('m')).release('ok');
    expect(seen).toEqual([]);
    const lease = await worker.acquire('m');
    const id = lease.replica.id;
    lease.release('failed');
    expect(seen).toEqual([`${id}:failed`]);
    worker.recordScrapeFailure(id, 'refused', 'unreachable');
    expect(seen).toHaveLength(1);

    // The other process, told by the board, takes the replica out of rotation too.
    const peer = new Router({ now: () => clock });
    peer.setReplicas([replica('a'), replica('b')]);
    const board = new BreakerBoard(
      (states) => peer.adoptBreakers(states),
      () => clock,
    );
    board.setReplicas([replica('a'), replica('b')]);
    board.evidence(id, { kind: 'failed', needsRequest: false });
    await turn();
    expect(peer.loads().find((l) => l.id === id)?.breaker).toBe('open');
    const other = peer.tryAcquire('m');
    expect(other?.replica.id).not.toBe(id);
    other?.release('ok');
    clock = 1000;
    expect(peer.loads().find((l) => l.id === id)?.breaker).toBe('half-open');
  });

  it('releases a lease refused by a healthy engine with its key: counted, not a failure', async () => {
    const router = new Router({ now: () => 0 });
    router.setReplicas([replica('a')]);
    const seen: string[] = [];
    router.onBreakerEvidence((id, e) => seen.push(e.kind === 'refused' ? `${id}:refused:${e.key}` : e.kind));
    for (const key of ['k1', 'k1', 'k2']) (await router.acquire('m')).release('refused', key);
    expect(seen).toEqual(['a:refused:k1', 'a:refused:k2']);
    expect(router.loads()[0]?.breaker).toBe('closed');
    (await router.acquire('m')).release('refused', 'k3');
    expect(router.loads()[0]?.breaker).toBe('open');
  });
});
