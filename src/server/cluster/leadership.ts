import type { Logger } from 'pino';

import { messageOf } from '../../core/errors.js';
import type { Fence, LeaseRecord, Store } from '../../store/store.js';

/** The lease whose holder places replicas and reconciles the fleet. */
export const leaderLease = 'leader';

export interface LeadershipOptions {
  store: Store;
  /** This control plane's id (the lease's holder). */
  id: string;
  /** Where it serves, once it listens. */
  url: () => string;
  version: string;
  /** How long the lease lasts unrenewed (ha.lease_s). */
  leaseMs: number;
  logger: Logger;
  now?: () => number;
}

/** What the fleet asks of leadership: whether to place, and the fence its writes carry. */
export interface LeaderView {
  leads(): boolean;
  fence(): Fence | undefined;
  /** A fenced write was refused: stop acting as leader until the lease is ours again. */
  lost(why: string): void;
  onChange(fn: (leads: boolean) => void): void;
}

/**
 * One control plane leads at a time: it holds the `leader` lease, renewed every third of
 * its length. Every control plane tries to take it on the same beat, so when the leader
 * dies another holds it within a lease and a third. A leader that cannot renew stops
 * leading when its lease would have run out by its own clock, before another can take
 * it by the database's; and its writes carry the lease's token, which the store checks,
 * so a leader that did not notice in time still writes nothing.
 */
export class Leadership implements LeaderView {
  readonly #o: LeadershipOptions;
  readonly #startedAt: string;
  readonly #listeners: ((leads: boolean) => void)[] = [];
  #lease: LeaseRecord | undefined;
  /** By this process's clock: when the lease runs out unless renewed. */
  #validUntil = 0;
  #leads = false;
  #timer: NodeJS.Timeout | undefined;
  #beat: Promise<void> | undefined;
  #stopped = false;

  constructor(options: LeadershipOptions) {
    this.#o = options;
    this.#startedAt = new Date(this.#now()).toISOString();
  }

  get id(): string {
    return this.#o.id;
  }

  /** Claims (or not) at once, then keeps trying on every beat. */
  async start(): Promise<void> {
    await this.#tick();
    this.#timer = setInterval(() => void this.#tick(), Math.max(200, Math.floor(this.#o.leaseMs / 3)));
    this.#timer.unref();
  }

  /** Gives the lease up, so another control plane takes over now rather than after it expires. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#beat;
    const wasLeader = this.#leads;
    this.#set(false, 'stopping');
    try {
      if (wasLeader) await this.#o.store.cluster.releaseLease(leaderLease, this.#o.id);
      await this.#o.store.cluster.forget(this.#o.id);
    } catch (e) {
      this.#o.logger.warn({ err: messageOf(e) }, 'could not give up the leader lease; it expires by itself');
    }
  }

  leads(): boolean {
    if (this.#leads && this.#now() >= this.#validUntil)
      this.#set(false, 'its lease ran out before it was renewed');
    return this.#leads;
  }

  fence(): Fence | undefined {
    if (!this.leads() || this.#lease === undefined) return undefined;
    return { lease: leaderLease, holder: this.#o.id, token: this.#lease.token };
  }

  lost(why: string): void {
    this.#validUntil = 0;
    this.#set(false, why);
  }

  onChange(fn: (leads: boolean) => void): void {
    this.#listeners.push(fn);
  }

  /** Renews or claims the lease and says this control plane is alive. */
  #tick(): Promise<void> {
    if (this.#stopped || this.#beat !== undefined) return this.#beat ?? Promise.resolve();
    this.#beat = this.#claim().finally(() => (this.#beat = undefined));
    return this.#beat;
  }

  async #claim(): Promise<void> {
    const asked = this.#now();
    try {
      const { held, lease } = await this.#o.store.cluster.claimLease(
        leaderLease,
        this.#o.id,
        this.#o.leaseMs,
      );
      if (this.#stopped) return;
      this.#lease = lease;
      // Counted from before the claim was sent: the database's term began no earlier.
      if (held) this.#validUntil = asked + this.#o.leaseMs;
      if (held !== this.#leads)
        this.#set(held, held ? `took the lease (term ${lease.token})` : `${lease.holder} holds the lease`);
      const at = new Date(this.#now()).toISOString();
      await this.#o.store.cluster.announce({
        id: this.#o.id,
        url: this.#o.url(),
        version: this.#o.version,
        started_at: this.#startedAt,
        seen_at: at,
      });
    } catch (e) {
      this.#o.logger.warn({ err: messageOf(e) }, 'could not reach the store to renew the leader lease');
      this.leads();
    }
  }

  #set(leads: boolean, why: string): void {
    if (leads === this.#leads) return;
    this.#leads = leads;
    if (leads)
      this.#o.logger.info({ term: this.#lease?.token, why }, 'leading: this control plane places replicas');
    else if (this.#stopped) this.#o.logger.info('giving up the lead: stopping');
    else this.#o.logger.warn({ why }, 'not leading: another control plane places replicas');
    for (const l of this.#listeners) l(leads);
  }

  #now(): number {
    return this.#o.now?.() ?? Date.now();
  }
}
