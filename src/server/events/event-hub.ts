import type { Role } from '../../core/api-types.js';

/** What a client of GET /api/v1/events can be told changed. */
export const eventTopics = [
  'nodes',
  'replicas',
  'models',
  'rollouts',
  'traffic',
  'keys',
  'config',
  'usage',
] as const;
export type EventTopic = (typeof eventTopics)[number];

/** Topics whose routes need an admin key (keys, config, usage); the others any API key reads. */
const adminTopics: ReadonlySet<EventTopic> = new Set<EventTopic>(['keys', 'config', 'usage']);

/** The topics a key of this role may follow: what it may read through the API. */
export function topicsFor(role: Role): EventTopic[] {
  if (role === 'metrics') return [];
  return eventTopics.filter((t) => role === 'admin' || !adminTopics.has(t));
}

/**
 * An event's summary: names or ids of what changed, by kind (`{ replicas: ['r-1'] }`), or
 * nothing (`{}`: read the topic's route again). Summaries sent close together are merged.
 */
export type EventData = Readonly<Record<string, readonly string[]>>;

export type EventSink = (topic: EventTopic, data: EventData) => void;

/** What publishes: the fleet, the registry, the catalog, the key routes. */
export interface EventPublisher {
  publish(topic: EventTopic, data?: EventData): void;
}

export interface EventHubOptions {
  /** The least time between two events of one topic; those in between are merged into the next. */
  minGapMs?: number;
  now?: () => number;
}

interface Subscriber {
  topics: ReadonlySet<EventTopic>;
  send: EventSink;
  close: () => void;
}

interface TopicState {
  last: number;
  pending: Record<string, Set<string>> | undefined;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The control plane's changes, told to the clients that follow them (the console). Local to
 * this process: another control plane on the same database tells its own clients only.
 * Each topic is sent at most once per `minGapMs` (downloads report many times a second);
 * what comes in between is merged, so no change is lost, only batched.
 */
export class EventHub implements EventPublisher {
  readonly #subscribers = new Set<Subscriber>();
  readonly #topics = new Map<EventTopic, TopicState>();
  readonly #minGapMs: number;
  readonly #now: () => number;
  #closed = false;

  constructor(options: EventHubOptions = {}) {
    this.#minGapMs = options.minGapMs ?? 250;
    this.#now = options.now ?? Date.now;
  }

  /** Clients following now (tests check that one gone is removed). */
  get size(): number {
    return this.#subscribers.size;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Follows the topics given; `close` is called when the hub closes (the server stops).
   * Returns the function that stops following.
   */
  subscribe(topics: readonly EventTopic[], send: EventSink, close: () => void): () => void {
    const s: Subscriber = { topics: new Set(topics), send, close };
    if (this.#closed) {
      close();
      return () => undefined;
    }
    this.#subscribers.add(s);
    return () => {
      this.#subscribers.delete(s);
    };
  }

  publish(topic: EventTopic, data: EventData = {}): void {
    if (this.#closed) return;
    let t = this.#topics.get(topic);
    if (t === undefined) {
      t = { last: -Infinity, pending: undefined, timer: undefined };
      this.#topics.set(topic, t);
    }
    t.pending = mergeInto(t.pending ?? {}, data);
    if (t.timer !== undefined) return;
    const wait = t.last + this.#minGapMs - this.#now();
    if (wait <= 0) {
      this.#flush(topic, t);
      return;
    }
    t.timer = setTimeout(() => this.#flush(topic, t), wait);
    t.timer.unref();
  }

  /** Ends every subscription (the server stops): their streams close, and no timer is left. */
  close(): void {
    this.#closed = true;
    for (const t of this.#topics.values()) if (t.timer !== undefined) clearTimeout(t.timer);
    this.#topics.clear();
    const subscribers = [...this.#subscribers];
    this.#subscribers.clear();
    for (const s of subscribers) s.close();
  }

  #flush(topic: EventTopic, t: TopicState): void {
    t.timer = undefined;
    t.last = this.#now();
    const pending = t.pending ?? {};
    t.pending = undefined;
    const data = Object.fromEntries(Object.entries(pending).map(([k, v]) => [k, [...v].sort()]));
    for (const s of this.#subscribers) if (s.topics.has(topic)) s.send(topic, data);
  }
}

function mergeInto(into: Record<string, Set<string>>, data: EventData): Record<string, Set<string>> {
  for (const [k, values] of Object.entries(data)) {
    const set = (into[k] ??= new Set());
    for (const v of values) set.add(v);
  }
  return into;
}
