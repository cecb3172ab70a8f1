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
