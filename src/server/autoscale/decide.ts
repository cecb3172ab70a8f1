import type { AutoscaleSpec } from '../../catalog/model-spec.js';
import type { GatewayLoadReport } from '../../protocol/load-report.js';

/**
 * The autoscaler's decision for one model, pure: the count it should run from the load the
 * gateways see. As Kubernetes' HPA and KEDA do: desired = ceil(total load / target), where a
 * replica's load is the share of its slots busy; up at once (a step at a time), down only
 * once the highest count wanted over a quiet window is lower.
 */

/** One replica's figures, summed over the gateways (the engine's own where it reported them). */
export interface ReplicaLoad {
  id: string;
  running: number;
  waiting: number;
  capacity: number;
  kvUsage?: number | undefined;
}

/** A model's load, over every gateway. */
export interface ModelLoad {
  replicas: ReplicaLoad[];
  /** Requests waiting in the gateways for a replica (summed). */
  queued: number;
  /** The gateways' requests on its replicas now (summed). */
  inFlight: number;
  /** The last request any gateway took for it (epoch ms). */
  lastRequestAt?: number | undefined;
  /** The latest cold start any gateway measured. */
  coldStart?: { ms: number; at: number } | undefined;
}

export interface DecideSettings {
  scaleDownWindowMs: number;
  scaleUpStep: number;
}

/** What the count wanted was at a time (kept over the scale-down window). */
export interface Recommendation {
  at: number;
  desired: number;
}

export interface DecideInput {
  spec: AutoscaleSpec;
  current: number;
  /** Undefined: no gateway reported on the model within the reports' lifetime. */
  load: ModelLoad | undefined;
  lastRequestAt: number | undefined;
  /** When the count last changed (or the autoscaler took the model on). */
  lastChangeAt: number;
  now: number;
  /** A rolling change of the model runs: the count is held. */
  rolling: boolean;
  /** The counts wanted before, within the scale-down window. */
  recommendations: readonly Recommendation[];
  settings: DecideSettings;
}

export type Direction = 'up' | 'down' | 'zero' | 'wake';

export interface Decision {
  replicas: number;
  /** Undefined: held where it is. */
  direction: Direction | undefined;
  reason: string;
  figures: Record<string, number>;
  /** The count wanted now, within [min, max], to remember for the window; undefined when none could be told. */
  recommendation: number | undefined;
}

const round = (n: number) => Math.round(n * 1000) / 1000;

/** The figures of a model's load: per replica max(slots busy, KV use), and the queue spread over the slots of one. */
export function loadFigures(load: ModelLoad): {
  replicaLoad: number;
  queueLoad: number;
  total: number;
  capacity: number;
} {
  const caps = load.replicas.map((r) => r.capacity).filter((c) => c > 0);
  // At zero no replica says its slots: a queued request counts as a whole replica's load.
  const capacity = caps.length === 0 ? 1 : caps.reduce((a, b) => a + b, 0) / caps.length;
  let replicaLoad = 0;
  for (const r of load.replicas) {
    const busy = r.capacity > 0 ? (r.running + r.waiting) / r.capacity : 0;
    replicaLoad += Math.max(busy, r.kvUsage ?? 0);
  }
  const queueLoad = load.queued / capacity;
  return { replicaLoad, queueLoad, total: replicaLoad + queueLoad, capacity };
}

export function decide(input: DecideInput): Decision {
  const { spec, current, load, now } = input;
  const hold = (reason: string, figures: Record<string, number> = {}, recommendation?: number): Decision => ({
    replicas: current,
    direction: undefined,
    reason,
    figures: { replicas: current, ...figures },
    recommendation,
  });
  const to = (replicas: number, direction: Direction, reason: string, figures: Record<string, number>) => ({
    replicas,
    direction,
    reason,
    figures: { replicas: current, ...figures },
    recommendation: replicas,
  });

  if (input.rolling) return hold('a rolling change of the model runs: its count is held until it ends');
  // Bounds changed under it (ctl model autoscale): into them at once.
  if (current > spec.max) return to(spec.max, 'down', `above max ${spec.max}`, { max: spec.max });
  if (current < spec.min) return to(spec.min, 'up', `below min ${spec.min}`, { min: spec.min });

  const queued = load?.queued ?? 0;
  const inFlight = load?.inFlight ?? 0;
  if (current === 0) {
    if (queued > 0 || inFlight > 0)
      return to(1, 'wake', `${queued} request${queued === 1 ? '' : 's'} waiting at zero`, {
        queued,
        in_flight: inFlight,
      });
    return hold('at zero, no request waiting', { queued });
  }

  // Scale to zero: no request for idle_s, and none waiting or running.
  const lastActive = Math.max(input.lastRequestAt ?? 0, input.lastChangeAt);
  const idleMs = now - lastActive;
  if (spec.min === 0 && queued === 0 && inFlight === 0 && idleMs >= spec.idle_s * 1000) {
    return to(0, 'zero', `no request for ${Math.floor(idleMs / 1000)} s (idle_s: ${spec.idle_s})`, {
      idle_s: Math.floor(idleMs / 1000),
    });
  }

  if (load === undefined) return hold('no load figures from the gateways');
  // Its replicas are starting (just woken, say): a queue says nothing yet of how many it needs.
  if (load.replicas.length === 0)
    return hold('no replica reports figures yet (starting): held until one does', { queued });

  const f = loadFigures(load);
  // Above zero, the formula never asks for zero: only idle_s stops the last replica.
  const floor = Math.max(spec.min, 1);
  const raw = Math.ceil(f.total / spec.target - 1e-9);
  const desired = Math.min(spec.max, Math.max(floor, raw));
  const figures = {
    load: round(f.replicaLoad),
    queued,
    queue_load: round(f.queueLoad),
    total_load: round(f.total),
    per_replica: round(f.total / current),
    target: spec.target,
    desired,
  };
  const why = `load ${round(f.total)} over ${current} replica${current === 1 ? '' : 's'} (${round(f.total / current)} each, target ${spec.target})`;

  if (desired > current) {
    const next = Math.min(desired, current + input.settings.scaleUpStep);
    return { ...to(next, 'up', `${why}: wants ${desired}`, figures), recommendation: desired };
  }

  // Down only to the highest count wanted over the window, and not before the window has passed since the last change.
  const windowStart = now - input.settings.scaleDownWindowMs;
  let stabilised = desired;
  for (const r of input.recommendations) if (r.at > windowStart) stabilised = Math.max(stabilised, r.desired);
  if (stabilised < current && now - input.lastChangeAt >= input.settings.scaleDownWindowMs) {
    return {
      ...to(
        stabilised,
        'down',
        `${why}: ${stabilised} wanted at most over the last ${input.settings.scaleDownWindowMs / 1000} s`,
        { ...figures, window_max: stabilised },
      ),
      recommendation: desired,
    };
  }
  return hold(
    desired < current ? `${why}: wants ${desired}, waiting out the scale-down window` : why,
    figures,
    desired,
  );
}

/**
 * A model's load over the gateways' reports: engine figures of a replica are the engine's own
 * (each gateway reads the same), so the largest reading counts; queues and in-flight requests
 * are each gateway's own, so they add up. A replica with no fresh reading counts its gateways'
 * requests on it as running. Undefined when no report names the model.
 */
export function modelLoad(reports: readonly GatewayLoadReport[], model: string): ModelLoad | undefined {
  const replicas = new Map<string, ReplicaLoad & { inFlightSum: number; fresh: boolean }>();
  let seen = false;
  let queued = 0;
  let inFlight = 0;
  let lastRequestAt: number | undefined;
  let coldStart: { ms: number; at: number } | undefined;
  for (const report of reports) {
    for (const m of report.models) {
      if (m.model !== model) continue;
      seen = true;
      queued += m.queued;
      inFlight += m.inFlight;
      if (m.lastRequestAt !== undefined) lastRequestAt = Math.max(lastRequestAt ?? 0, m.lastRequestAt);
      if (m.coldStart !== undefined && (coldStart === undefined || m.coldStart.at > coldStart.at))
        coldStart = m.coldStart;
      for (const r of m.replicas) {
        const had = replicas.get(r.id) ?? {
          id: r.id,
          running: 0,
          waiting: 0,
          capacity: r.capacity,
          inFlightSum: 0,
          fresh: false,
        };
        had.capacity = Math.max(had.capacity, r.capacity);
        had.inFlightSum += r.inFlight;
        if (!r.stale) {
          had.fresh = true;
          had.running = Math.max(had.running, r.running);
          had.waiting = Math.max(had.waiting, r.waiting);
          if (r.kvUsage !== undefined) had.kvUsage = Math.max(had.kvUsage ?? 0, r.kvUsage);
        }
        replicas.set(r.id, had);
      }
    }
  }
  if (!seen) return undefined;
  return {
    replicas: [...replicas.values()].map(({ inFlightSum, fresh, ...r }) =>
      fresh ? r : { ...r, running: inFlightSum, waiting: 0 },
    ),
    queued,
    inFlight,
    ...(lastRequestAt === undefined ? {} : { lastRequestAt }),
    ...(coldStart === undefined ? {} : { coldStart }),
  };
}
