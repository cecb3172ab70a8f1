import type { Logger } from 'pino';
import { Counter, Gauge, Registry } from 'prom-client';

import type { ModelSpec } from '../../catalog/model-spec.js';
import type { AutoscaleSettings } from '../../config/schema.js';
import { messageOf } from '../../core/errors.js';
import type { GatewayLoadReport, ScaleSignals, WakeAnswer } from '../../protocol/load-report.js';
import type { ScaleView } from '../../protocol/model-views.js';
import type { ReplicaView } from '../../protocol/replica-views.js';
import type { RolloutView } from '../../protocol/rollout-views.js';
import type { ModelScaleRecord, ScaleDecision, Store } from '../../store/store.js';
import { systemActor } from '../state/admin-key.js';

import { LoadBoard, mergeReports } from './board.js';
import { decide, modelLoad, type Decision, type Direction, type Recommendation } from './decide.js';

/** What the autoscaler needs of placement. */
export interface ScaledFleet {
  readonly leads: boolean;
  poke(): void;
  settled(): Promise<void>;
  replicas(model?: string): ReplicaView[];
  rollout(model: string): Promise<RolloutView | undefined>;
}

export interface AutoscalerOptions {
  store: Store;
  /** Every model of the catalog (declared and added). */
  specs: () => Promise<ModelSpec[]>;
  fleet: ScaledFleet;
  settings: () => AutoscaleSettings;
  logger: Logger;
  /** This control plane's id: in HA, followers share the reports they get under it. */
  controlPlaneId: string;
  /** Several control planes share the store (PostgreSQL): reports go through it to the leader. */
  shared: boolean;
  /** A count changed (the console's model page follows). */
  onChange?: () => void;
  now?: () => number;
}

/** The cluster state key under which a control plane shares the reports its gateways sent it. */
export const sharedLoadKey = (controlPlane: string) => `gateway-load:${controlPlane}`;

/**
 * Scales autoscaled models on the gateways' load (decide.ts), on the leading control plane
 * only: every `interval_s` each model is decided on, a change is stored and audited (as the
 * system) and placement runs it. Gateways report to whichever control plane they talk to;
 * in HA a follower writes what it got to the store's shared state every second and the
 * leader reads every control plane's. `countOf` is what placement runs of an autoscaled model.
 */
export class Autoscaler implements ScaleSignals {
  readonly #o: AutoscalerOptions;
  readonly #board = new LoadBoard();
  readonly #records = new Map<string, ModelScaleRecord>();
  /** When the autoscaler took a model on, for a model it never changed (idle counts from there). */
  readonly #since = new Map<string, number>();
  readonly #recommendations = new Map<string, Recommendation[]>();
  /** What the last tick wanted of each model (the desired gauge). */
  readonly #desired = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #sharedAt = 0;
  #stopped = false;
  /** Prometheus metrics of the autoscaler and of replicas by state, for the gateway's /metrics. */
  readonly metrics = new Registry();
  readonly #decisions: Counter<'model' | 'direction'>;

  constructor(options: AutoscalerOptions) {
    this.#o = options;
    const registers = [this.metrics];
    this.#decisions = new Counter({
      name: 'llmgw_autoscaler_decisions_total',
      help: 'Changes of an autoscaled model’s replica count, by direction (up, down, zero, wake).',
      labelNames: ['model', 'direction'],
      registers,
    });
    const desired = this.#desired;
    new Gauge({
      name: 'llmgw_model_replicas_desired',
      help: 'Replicas the autoscaler wants of a model (its count, or what its last decision wanted).',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const [model, n] of desired) this.set({ model }, n);
      },
    });
    const fleet = options.fleet;
    new Gauge({
      name: 'llmgw_replicas',
      help: 'Replicas of each model by state (ready, starting, downloading, pending, failed, ...).',
      labelNames: ['model', 'state'],
      registers,
      collect() {
        this.reset();
        const counts = new Map<string, { model: string; state: string; n: number }>();
        for (const r of fleet.replicas()) {
          const key = `${r.model}\u0000${r.state}`;
          const c = counts.get(key) ?? { model: r.model, state: r.state, n: 0 };
          c.n++;
          counts.set(key, c);
        }
        for (const c of counts.values()) this.set({ model: c.model, state: c.state }, c.n);
      },
    });
  }

  #now(): number {
    return this.#o.now?.() ?? Date.now();
  }

  /** Reads the counts kept in the store; call before placement first runs. */
  async start(): Promise<void> {
    await this.#reload();
    this.#schedule();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#ticking;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#ticking = this.tick()
        .catch((e: unknown) => this.#o.logger.warn({ err: messageOf(e) }, 'autoscaler pass failed'))
        .finally(() => {
          this.#ticking = undefined;
          this.#schedule();
        });
    }, this.#o.settings().interval_s * 1000);
    this.#timer.unref();
  }

  async #reload(): Promise<void> {
    const records = await this.#o.store.scale.list();
    this.#records.clear();
    for (const r of records) this.#records.set(r.model, r);
  }

  /** The count placement runs of a model: its autoscaled count within [min, max]; undefined when not autoscaled. */
  countOf(spec: Pick<ModelSpec, 'name' | 'replicas' | 'autoscale'>): number | undefined {
    const a = spec.autoscale;
    if (a === undefined) return undefined;
    const n = this.#records.get(spec.name)?.replicas ?? spec.replicas;
    return Math.min(a.max, Math.max(a.min, n));
  }

  /** What ctl model show and the console show of an autoscaled model. */
  view(spec: ModelSpec): ScaleView | undefined {
    const count = this.countOf(spec);
    if (count === undefined) return undefined;
    const r = this.#records.get(spec.name);
    return {
      replicas: count,
      ...(r?.decision == null ? {} : { last_decision: r.decision }),
      ...(r?.last_request_at == null ? {} : { last_request_at: r.last_request_at }),
      ...(r?.cold_start == null ? {} : { cold_start: r.cold_start }),
    };
  }

  /** A gateway's load report (in process, or POST /api/v1/gateway/load). */
  report(report: GatewayLoadReport): Promise<void> {
    this.#board.put(report, this.#now());
    // A follower passes its gateways' figures on to the leader (at most once a second).
    if (this.#o.shared && !this.#o.fleet.leads)
      void this.#share(false).catch((e: unknown) =>
        this.#o.logger.warn({ err: messageOf(e) }, 'could not share the gateways’ load reports'),
      );
    return Promise.resolve();
  }

  /**
   * A gateway holds a request for a model at zero: one replica starts at once (here when this
   * control plane leads; else the leader starts it on the queued request in the report shared
   * with it). Refused, with why, when the model is not autoscaled with min 0, or its replica
   * cannot be placed.
   */
  async wake(model: string): Promise<WakeAnswer> {
    const spec = (await this.#o.specs()).find((s) => s.name === model);
    if (spec === undefined) return { ok: false, reason: `model "${model}" does not exist` };
    if (spec.autoscale?.min !== 0)
      return {
        ok: false,
        reason:
          spec.autoscale === undefined
            ? `model ${model} is not autoscaled, so it is never scaled to zero: give it autoscale with min: 0 (llmgw ctl model autoscale ${model} --min 0 --max N)`
            : `model ${model} has autoscale min ${spec.autoscale.min}, so it is never scaled to zero`,
      };
    if (this.countOf(spec) === 0) {
      if (this.#o.fleet.leads)
        await this.#apply(spec, 0, {
          replicas: 1,
          direction: 'wake',
          reason: 'a gateway holds a request for it',
          figures: { replicas: 0 },
          recommendation: 1,
        });
      else await this.#share(true);
    }
    if (!this.#o.fleet.leads) return { ok: true };
    this.#o.fleet.poke();
    await this.#o.fleet.settled();
    const pending = this.#o.fleet.replicas(model).find((r) => r.state === 'pending' && r.id === null);
    if (pending !== undefined)
      return { ok: false, reason: `no replica of ${model} can start: ${pending.reason ?? 'no room'}` };
    return { ok: true };
  }

  /** One pass: the leader decides on every autoscaled model; a follower shares its reports and reads the counts. */
  async tick(): Promise<void> {
    const now = this.#now();
    const settings = this.#o.settings();
    const ttlMs = settings.report_ttl_s * 1000;
    if (!this.#o.fleet.leads) {
      if (this.#o.shared) await this.#share(false);
      await this.#reload();
      return;
    }
    const reports = mergeReports(
      [this.#board.fresh(now, ttlMs), ...(this.#o.shared ? await this.#othersReports() : [])],
      now,
      ttlMs,
    );
    const specs = await this.#o.specs();
    const scaled = specs.filter((s) => s.autoscale !== undefined);
    const names = new Set(scaled.map((s) => s.name));
    for (const model of [...this.#records.keys()]) {
      if (names.has(model)) continue;
      // Autoscale taken off (or the model removed): its state goes too.
      this.#records.delete(model);
      this.#desired.delete(model);
      await this.#o.store.scale.remove(model);
    }
    for (const spec of scaled) {
      try {
        await this.#decideOne(spec, reports, now, settings);
      } catch (e) {
        this.#o.logger.warn({ model: spec.name, err: messageOf(e) }, 'autoscaler could not decide');
      }
    }
  }

  async #decideOne(
    spec: ModelSpec,
    reports: readonly GatewayLoadReport[],
    now: number,
    settings: AutoscaleSettings,
  ): Promise<void> {
    const a = spec.autoscale;
    if (a === undefined) return;
    const record = this.#records.get(spec.name);
    const current = this.countOf(spec) ?? 0;
    if (!this.#since.has(spec.name)) this.#since.set(spec.name, now);
    const load = modelLoad(reports, spec.name);
    const storedRequest = record?.last_request_at == null ? undefined : Date.parse(record.last_request_at);
    const lastRequestAt = Math.max(load?.lastRequestAt ?? 0, storedRequest ?? 0) || undefined;
    const decidedAt = record?.decision == null ? undefined : Date.parse(record.decision.at);
    const windowMs = settings.scale_down_window_s * 1000;
    const recommendations = (this.#recommendations.get(spec.name) ?? []).filter((r) => r.at > now - windowMs);
    const d = decide({
      spec: a,
      current,
      load,
      lastRequestAt,
      lastChangeAt: Math.max(decidedAt ?? 0, this.#since.get(spec.name) ?? now),
      now,
      rolling: (await this.#o.fleet.rollout(spec.name))?.state === 'rolling',
      recommendations,
      settings: { scaleDownWindowMs: windowMs, scaleUpStep: settings.scale_up_step },
    });
    if (d.recommendation !== undefined) recommendations.push({ at: now, desired: d.recommendation });
    this.#recommendations.set(spec.name, recommendations);
    this.#desired.set(spec.name, d.recommendation ?? d.replicas);

    const seen = {
      last_request_at: lastRequestAt === undefined ? null : new Date(lastRequestAt).toISOString(),
      cold_start:
        load?.coldStart === undefined
          ? (record?.cold_start ?? null)
          : { ms: load.coldStart.ms, at: new Date(load.coldStart.at).toISOString() },
    };
    if (d.direction !== undefined && d.replicas !== current) {
      await this.#apply(spec, current, d, seen);
      return;
    }
    // What the gateways saw, kept for ctl model show: written when it moved on by a few seconds.
    const requestMoved =
      lastRequestAt !== undefined && (storedRequest === undefined || lastRequestAt - storedRequest >= 5000);
    const coldMoved = seen.cold_start?.at !== (record?.cold_start?.at ?? undefined);
    if (requestMoved || coldMoved) {
      const next = { model: spec.name, replicas: current, decision: record?.decision ?? null, ...seen };
      await this.#o.store.scale.put(next);
      this.#records.set(spec.name, { ...next, updated_at: new Date(now).toISOString() });
    }
  }

  async #apply(
    spec: ModelSpec,
    from: number,
    d: Pick<Decision, 'replicas' | 'reason' | 'figures'> & { direction: Direction | undefined } & {
      recommendation?: number | undefined;
    },
    seen?: Pick<ModelScaleRecord, 'last_request_at' | 'cold_start'>,
  ): Promise<void> {
    const direction = d.direction ?? (d.replicas > from ? 'up' : 'down');
    const at = new Date(this.#now()).toISOString();
    const decision: ScaleDecision = {
      at,
      from,
      to: d.replicas,
      direction,
      reason: d.reason,
      figures: d.figures,
    };
    const record = this.#records.get(spec.name);
    const next = {
      model: spec.name,
      replicas: d.replicas,
      decision,
      last_request_at: seen?.last_request_at ?? record?.last_request_at ?? null,
      cold_start: seen?.cold_start ?? record?.cold_start ?? null,
    };
    // Set before the write: a wake while it is written does not start a second replica.
    this.#records.set(spec.name, { ...next, updated_at: at });
    this.#desired.set(spec.name, d.recommendation ?? d.replicas);
    try {
      await this.#o.store.scale.put(next, { actor: systemActor });
    } catch (e) {
      if (record === undefined) this.#records.delete(spec.name);
      else this.#records.set(spec.name, record);
      throw e;
    }
    this.#decisions.inc({ model: spec.name, direction });
    this.#o.logger.info(
      { model: spec.name, from, to: d.replicas, direction, reason: d.reason, figures: d.figures },
      'autoscaled',
    );
    this.#o.fleet.poke();
    this.#o.onChange?.();
  }

  /** A follower's reports, written for the leader (at most once a second, or now for a wake). */
  async #share(now: boolean): Promise<void> {
    const t = this.#now();
    if (!now && t - this.#sharedAt < 1000) return;
    this.#sharedAt = t;
    const reports = this.#board.fresh(t, this.#o.settings().report_ttl_s * 1000);
    await this.#o.store.cluster.putState(sharedLoadKey(this.#o.controlPlaneId), JSON.stringify(reports));
  }

  /** The reports the other control planes shared. */
  async #othersReports(): Promise<GatewayLoadReport[][]> {
    const out: GatewayLoadReport[][] = [];
    for (const cp of await this.#o.store.cluster.controlPlanes()) {
      if (cp.id === this.#o.controlPlaneId) continue;
      const text = await this.#o.store.cluster.state(sharedLoadKey(cp.id));
      if (text === undefined) continue;
      try {
        const list = JSON.parse(text) as unknown;
        if (Array.isArray(list)) out.push(list as GatewayLoadReport[]);
      } catch {
        // A half-written value is skipped: the next one comes within a second.
      }
    }
    return out;
  }
}
