import type { AcquireOptions, Lease } from './types.js';

/** What a pick is told of the request. */
export type Wants = Omit<AcquireOptions, 'signal' | 'exclude'> | undefined;

/** A request waiting in its model's queue for a replica. */
export interface Waiter<E> {
  readonly group: ModelGroup<E>;
  readonly wants: Wants;
  readonly exclude: ReadonlySet<string> | undefined;
  readonly signal: AbortSignal | undefined;
  readonly enqueuedAt: number;
  readonly resolve: (lease: Lease) => void;
  readonly reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
  prev: Waiter<E> | undefined;
  next: Waiter<E> | undefined;
}

/** One model: its replicas (E, the router's entries) in an array, scanned per request, and its FIFO of waiters. */
export class ModelGroup<E> {
  readonly model: string;
  entries: E[] = [];
  inFlight = 0;
  head: Waiter<E> | undefined = undefined;
  tail: Waiter<E> | undefined = undefined;
  queued = 0;
  /** Wakes the queue when the earliest breaker cooldown ends. */
  wake: NodeJS.Timeout | undefined = undefined;
  wakeAt = 0;
  /** The round-robin policy's next replica. */
  cursor = 0;

  constructor(model: string) {
    this.model = model;
  }

  push(waiter: Waiter<E>): void {
    waiter.prev = this.tail;
    if (this.tail) this.tail.next = waiter;
    else this.head = waiter;
    this.tail = waiter;
    this.queued++;
  }

  unlink(waiter: Waiter<E>): void {
    if (waiter.prev) waiter.prev.next = waiter.next;
    else this.head = waiter.next;
    if (waiter.next) waiter.next.prev = waiter.prev;
    else this.tail = waiter.prev;
    waiter.prev = undefined;
    waiter.next = undefined;
    this.queued--;
  }
}
