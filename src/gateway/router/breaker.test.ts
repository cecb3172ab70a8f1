import { describe, expect, it } from 'vitest';

import { Breaker } from './breaker.js';

describe('Breaker', () => {
  it('opens on the first failure and turns half-open when the cooldown ends', () => {
    const b = new Breaker();
    expect(b.state(0)).toBe('closed');
    expect(b.allows(0)).toBe(true);
    expect(b.failed(100)).toBe(true);
    expect(b.state(100)).toBe('open');
    expect(b.allows(1099)).toBe(false);
    expect(b.state(1100)).toBe('half-open');
    expect(b.allows(1100)).toBe(true);
  });

  it('lets exactly one trial through when half-open; its success closes it', () => {
    const b = new Breaker();
    b.failed(0);
    expect(b.admit()).toBe(true);
    expect(b.allows(1000)).toBe(false);
    b.succeeded(1200, true);
    expect(b.state(1200)).toBe('closed');
    expect(b.allows(1200)).toBe(true);
    expect(b.admit()).toBe(false);
  });

  it('doubles the cooldown when the trial fails, up to the cap, and a success resets it', () => {
    const b = new Breaker({ initialMs: 1000, maxMs: 5000 });
    let now = 0;
    const cooldowns: number[] = [];
    b.failed(now);
    for (let i = 0; i < 5; i++) {
      cooldowns.push(b.openUntil - now);
      now = b.openUntil;
      expect(b.admit()).toBe(true);
      expect(b.failed(now)).toBe(true);
    }
    cooldowns.push(b.openUntil - now);
    expect(cooldowns).toEqual([1000, 2000, 4000, 5000, 5000, 5000]);
    now = b.openUntil;
    b.admit();
    b.succeeded(now, true);
    b.failed(now);
    expect(b.openUntil - now).toBe(1000);
  });

  it('counts one incident once: failures of requests already in flight do not extend it', () => {
    const b = new Breaker();
    b.failed(0);
    expect(b.failed(10)).toBe(false);
    expect(b.failed(500)).toBe(false);
    expect(b.openUntil).toBe(1000);
  });

  it('a cancelled trial frees the trial for the next request', () => {
    const b = new Breaker();
    b.failed(0);
    const trial = b.admit();
    b.cancelled(trial);
    expect(b.allows(1000)).toBe(true);
    expect(b.state(1000)).toBe('half-open');
  });

  it('a success of a request sent before the opening does not close it during the cooldown', () => {
    const b = new Breaker();
    b.failed(0);
    b.succeeded(500, false);
    expect(b.state(500)).toBe('open');
    b.succeeded(1000, false);
    expect(b.state(1000)).toBe('closed');
  });

  it('an answered scrape after the cooldown closes it, but keeps the cooldown growing', () => {
    const b = new Breaker();
    b.failed(0);
    expect(b.answered(500)).toBe(false);
    expect(b.state(500)).toBe('open');
    expect(b.answered(1000)).toBe(true);
    expect(b.state(1000)).toBe('closed');
    // Its requests still fail: the next cooldown is longer.
    b.failed(1100);
    expect(b.openUntil).toBe(3100);
  });

  it('a failed scrape when half-open reopens it with a longer cooldown', () => {
    const b = new Breaker();
    b.failed(0);
    expect(b.failed(1000)).toBe(true);
    expect(b.state(1000)).toBe('open');
    expect(b.openUntil).toBe(3000);
  });
});

describe('a breaker opened by a request that hung', () => {
  it('is not closed by an answering scrape, only by a trial request that succeeds', () => {
    const b = new Breaker({ initialMs: 1000 });
    expect(b.failed(0, { needsRequest: true })).toBe(true);
    // Its metrics answer after the cooldown: still open, the trial still to come.
    expect(b.answered(1500)).toBe(false);
    expect(b.state(1500)).toBe('half-open');
    expect(b.allows(1500)).toBe(true);
    const trial = b.admit();
    b.succeeded(1600, trial);
    expect(b.state(1600)).toBe('closed');
    // Closed again, a later plain failure may be closed by a scrape as before.
    b.failed(2000);
    expect(b.answered(5000)).toBe(true);
  });
});

describe('5xx answers of a replica whose health check answers', () => {
  it('never open it for one key, however many', () => {
    const b = new Breaker();
    for (let i = 0; i < 100; i++) expect(b.refused(i, 'noisy', false)).toBe(false);
    expect(b.state(100)).toBe('closed');
  });

  it('open it once three keys got one since its last success, and a success forgets them', () => {
    const b = new Breaker();
    expect(b.refused(0, 'a', false)).toBe(false);
    expect(b.refused(1, 'b', false)).toBe(false);
    b.succeeded(2, false);
    expect(b.refused(3, 'c', false)).toBe(false);
    expect(b.refused(4, 'a', false)).toBe(false);
    expect(b.state(4)).toBe('closed');
    expect(b.refused(5, 'b', false)).toBe(true);
    expect(b.state(5)).toBe('open');
    expect(b.openUntil).toBe(1005);
  });

  it('free the trial when the trial is the one refused', () => {
    const b = new Breaker();
    b.failed(0);
    const trial = b.admit();
    expect(b.allows(1000)).toBe(false);
    b.refused(1000, 'a', trial);
    expect(b.allows(1000)).toBe(true);
  });
});

describe('a breaker shared by a gateway’s processes', () => {
  it('changes its version only when what a snapshot holds changes', () => {
    const b = new Breaker();
    const v = b.version;
    b.succeeded(0, false);
    b.answered(0);
    b.cancelled(false);
    expect(b.version).toBe(v);
    b.failed(0);
    expect(b.version).not.toBe(v);
    const open = b.version;
    b.failed(10);
    expect(b.version).toBe(open);
  });

  it('applies another process’s evidence as its own', () => {
    const b = new Breaker();
    expect(b.apply({ kind: 'failed', needsRequest: true }, 0)).toBe(true);
    b.apply({ kind: 'answered' }, 2000);
    expect(b.state(2000)).toBe('half-open');
    b.apply({ kind: 'succeeded', trial: true }, 2000);
    expect(b.state(2000)).toBe('closed');
    b.apply({ kind: 'refused', key: 'a' }, 3000);
    b.apply({ kind: 'refused', key: 'b' }, 3000);
    expect(b.apply({ kind: 'refused', key: 'c' }, 3000)).toBe(true);
  });

  it('adopts a snapshot on another clock: the cooldown left, openings, keys and whether it hung', () => {
    const primary = new Breaker();
    primary.failed(5000, { needsRequest: true });
    primary.refused(5100, 'k', false);
    const snapshot = primary.snapshot(5400);
    expect(snapshot).toEqual({ open: true, leftMs: 600, openings: 1, needsRequest: true, refusedBy: ['k'] });
    const worker = new Breaker();
    worker.adopt(snapshot, 100);
    expect(worker.state(699)).toBe('open');
    expect(worker.state(700)).toBe('half-open');
    expect(worker.answered(800)).toBe(false);
    expect(worker.snapshot(100)).toEqual(snapshot);
    // Its next opening doubles from there.
    worker.failed(700);
    expect(worker.openUntil).toBe(2700);
    worker.adopt(new Breaker().snapshot(0), 800);
    expect(worker.state(800)).toBe('closed');
    expect(worker.allows(800)).toBe(true);
  });
});
