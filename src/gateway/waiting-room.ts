import type { Logger } from 'pino';

import type { WakeAnswer } from '../protocol/load-report.js';
import type { CatalogEntry } from '../protocol/routes.js';

import { GatewayError } from './openai-errors.js';
import { cancelled } from './router/refusals.js';

/**
 * Requests for a model scaled to zero (a `wakeable` catalog entry with no ready replica)
 * wait here while a replica starts, instead of being refused: the room asks the control
 * plane to start the model (ScaleSignals.wake), has the gateway read its routes sooner,
 * and hands each request back to the normal path (the router) once the model has a ready
 * replica, oldest first. Bounded in count per model and in time per request.
 */

/** What the room needs to know of the gateway's routes now. */
export interface RoomView {
  /** The model has a ready replica: the router takes its requests. */
  ready(model: string): boolean;
  /** How many more requests the model's replicas and the router's queue take now (handed over at most this many at once). */
  room(model: string): number;
  /** The catalog's entry for the model; undefined once it left the catalog. */
  entry(model: string): CatalogEntry | undefined;
}

export interface WaitingRoomOptions {
  /** Requests that may wait per model; past it, 503 at once (gateway.waiting_room.max_per_model). */
  maxPerModel: number;
  /** How long one may wait before 503 (gateway.waiting_room.timeout_s). */
  timeoutMs: number;
  /** Asks the control plane to start the model; unset, requests only wait for a replica to come. */
  wake?: ((model: string) => Promise<WakeAnswer>) | undefined;
  /** A wake is sent again this often while requests wait (the control plane may have restarted). Default 5 s. */
  wakeEveryMs?: number | undefined;
  /** Reads the routes again (the gateway's refresh); called every `refreshMs` while anyone waits. */
  refresh: () => void;
  /** Default 250 ms. */
  refreshMs?: number | undefined;
  view: RoomView;
  logger: Logger;
  /** ms, monotonic. */
  now?: () => number;
}

interface Waiter {
  readonly enteredAt: number;
  readonly resolve: (waitedMs: number) => void;
  readonly reject: (e: Error) => void;
  readonly signal: AbortSignal | undefined;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
}

/** One model's waiters, in arrival order, and its wake-ups. */
interface ModelRoom {
  readonly model: string;
  readonly waiters: Set<Waiter>;
  waking: boolean;
  lastWakeAt: number;
  /** Why the last wake could not be sent (the control plane unreachable), until one is. */
  wakeError: string | undefined;
}

export class WaitingRoom {
  readonly #o: WaitingRoomOptions;
  readonly #wakeEveryMs: number;
  readonly #refreshMs: number;
  readonly #now: () => number;
  /** Every model that had a waiter: a catalog model each, so a bounded set. */
  readonly #rooms = new Map<string, ModelRoom>();
  #waiting = 0;
  #tick: NodeJS.Timeout | undefined;

  constructor(options: WaitingRoomOptions) {
    this.#o = options;
    this.#wakeEveryMs = options.wakeEveryMs ?? 5000;
    this.#refreshMs = options.refreshMs ?? 250;
    this.#now = options.now ?? (() => performance.now());
  }

  /**
   * Waits for a ready replica of the model; resolves with the ms waited. Throws at once
   * (GatewayError) when the model's room is full; rejects with the timeout, the control
   * plane's refusal, or RouterError `cancelled` when `signal` aborts (the client left).
   */
  enter(model: string, signal?: AbortSignal): Promise<number> {
    const room = this.#room(model);
    if (room.waiters.size >= this.#o.maxPerModel)
      throw new GatewayError(
        'no_ready_replica',
        `${model} is scaled to zero and starting, and ${room.waiters.size} requests already wait for it (gateway.waiting_room.max_per_model): retry in a few seconds`,
        { retryAfterS: 5 },
      );
    if (signal?.aborted) return Promise.reject(cancelled(model));
    const first = room.waiters.size === 0;
    const promise = new Promise<number>((resolve, reject) => {
      const waiter: Waiter = {
        enteredAt: this.#now(),
        resolve,
        reject,
        signal,
        timer: undefined,
        onAbort: undefined,
      };
      room.waiters.add(waiter);
      this.#waiting++;
      waiter.timer = setTimeout(() => {
        this.#leave(room, waiter);
        reject(this.#timedOut(room, waiter));
      }, this.#o.timeoutMs);
      waiter.timer.unref();
      if (signal !== undefined) {
        waiter.onAbort = () => {
          this.#leave(room, waiter);
          reject(cancelled(model));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
    });
    if (first && !room.waking) this.#wake(room);
    this.#arm();
    return promise;
  }

  /** Requests waiting: for one model, or in all. */
  waiting(model?: string): number {
    if (model === undefined) return this.#waiting;
    return this.#rooms.get(model)?.waiters.size ?? 0;
  }

  /** Every model that has had a waiter, with how many wait now (0 included: a gauge drops to 0 rather than vanish). */
  counts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const room of this.#rooms.values()) out.set(room.model, room.waiters.size);
    return out;
  }

  /** The routes changed (or a slot came free): hands waiters of models now ready to the router. */
  changed(): void {
    for (const room of this.#rooms.values()) if (room.waiters.size > 0) this.#check(room);
  }

  /** The gateway stops: every waiter is refused. */
  stop(): void {
    clearInterval(this.#tick);
    this.#tick = undefined;
    for (const room of this.#rooms.values())
      this.#refuseAll(
        room,
        (w) =>
          new GatewayError(
            'no_ready_replica',
            `the gateway stopped while the request waited ${seconds(this.#now() - w.enteredAt)} s for a replica of ${room.model} to start: send it again`,
            { retryAfterS: 1 },
          ),
      );
  }

  #check(room: ModelRoom): void {
    const model = room.model;
    if (this.#o.view.entry(model) === undefined) {
      this.#refuseAll(
        room,
        (w) =>
          new GatewayError(
            'model_not_found',
            `model "${model}" left the catalog while the request waited ${seconds(this.#now() - w.enteredAt)} s for it to start`,
            { param: 'model' },
          ),
      );
      return;
    }
    if (!this.#o.view.ready(model)) return;
    let budget = this.#o.view.room(model);
    const now = this.#now();
    for (const waiter of room.waiters) {
      if (budget <= 0) break;
      budget--;
      this.#leave(room, waiter);
      waiter.resolve(now - waiter.enteredAt);
    }
  }

  /** Asks the control plane to start the model: one call in flight per model. */
  #wake(room: ModelRoom): void {
    const wake = this.#o.wake;
    if (wake === undefined) return;
    room.waking = true;
    room.lastWakeAt = this.#now();
    const model = room.model;
    wake(model).then(
      (answer) => {
        room.waking = false;
        room.wakeError = undefined;
        if (answer.ok) return;
        this.#o.logger.warn({ model, reason: answer.reason }, 'the control plane will not start the model');
        this.#refuseAll(
          room,
          (w) =>
            new GatewayError(
              'no_ready_replica',
              `${model} is scaled to zero and cannot be started: ${answer.reason} (the request waited ${seconds(this.#now() - w.enteredAt)} s)`,
              { retryAfterS: 30 },
            ),
        );
      },
      (e: unknown) => {
        room.waking = false;
        const message = e instanceof Error ? e.message : String(e);
        if (room.wakeError === undefined)
          this.#o.logger.warn({ model, err: message }, 'could not ask the control plane to start the model');
        room.wakeError = message;
      },
    );
  }

  /** While anyone waits: routes read sooner, wakes repeated, waiters handed over as room comes. */
  #arm(): void {
    if (this.#tick !== undefined) return;
    this.#tick = setInterval(() => {
      if (this.#waiting === 0) {
        clearInterval(this.#tick);
        this.#tick = undefined;
        return;
      }
      this.#o.refresh();
      const now = this.#now();
      for (const room of this.#rooms.values()) {
        if (room.waiters.size === 0) continue;
        this.#check(room);
        if (room.waiters.size > 0 && !room.waking && now - room.lastWakeAt >= this.#wakeEveryMs)
          this.#wake(room);
      }
    }, this.#refreshMs);
    this.#tick.unref();
  }

  #timedOut(room: ModelRoom, waiter: Waiter): GatewayError {
    const model = room.model;
    const unavailable = this.#o.view.entry(model)?.unavailable;
    const reason =
      unavailable ??
      (room.wakeError === undefined
        ? `it is still starting (llmgw ctl replicas ${model} says how far it got)`
        : `the control plane could not be asked to start it (${room.wakeError})`);
    return new GatewayError(
      'no_ready_replica',
      `no replica of ${model} became ready in the ${seconds(this.#now() - waiter.enteredAt)} s the request waited (gateway.waiting_room.timeout_s): ${reason}`,
      { retryAfterS: 10 },
    );
  }

  #refuseAll(room: ModelRoom, error: (w: Waiter) => GatewayError): void {
    for (const waiter of room.waiters) {
      this.#leave(room, waiter);
      waiter.reject(error(waiter));
    }
  }

  #leave(room: ModelRoom, waiter: Waiter): void {
    if (!room.waiters.delete(waiter)) return;
    this.#waiting--;
    clearTimeout(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
  }

  #room(model: string): ModelRoom {
    let room = this.#rooms.get(model);
    if (room === undefined) {
      room = { model, waiters: new Set(), waking: false, lastWakeAt: 0, wakeError: undefined };
      this.#rooms.set(model, room);
    }
    return room;
  }
}

/** Seconds as a person reads them: 0.4, 12, 300. */
export function seconds(ms: number): string {
  const s = ms / 1000;
  return s >= 10 ? String(Math.round(s)) : String(Math.round(s * 10) / 10);
}
