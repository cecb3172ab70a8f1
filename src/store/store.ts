import type { ModelSpec } from '../catalog/model-spec.js';
import type { NodeInventory } from '../gpu/types.js';
import type { Origin } from '../models/origin.js';
import type { ModelShape } from '../models/shape.js';
import type { Shard } from '../placement/types.js';
import type { JoinTokenView } from '../protocol/node-views.js';
import { LlmgwError } from '../core/errors.js';

/**
 * The data-access layer of the control plane. One interface, one implementation over
 * Kysely, run on embedded SQLite (one control plane) or PostgreSQL (several sharing
 * one database). Every change that is audited writes its audit entry in the same
 * transaction, so a failed change leaves neither.
 */
export interface Store {
  readonly dialect: 'sqlite' | 'postgres';
  readonly models: ModelRepository;
  /** What each model's source resolved to (declared and added models alike). */
  readonly origins: ModelOriginRepository;
  readonly keys: KeyRepository;
  readonly audit: AuditRepository;
  readonly joinTokens: JoinTokenRepository;
  readonly nodes: NodeRepository;
  readonly fleet: FleetRepository;
  readonly usage: UsageRepository;
  /** Each model's latest rolling change (ctl model gpus and context, ctl replica restart). */
  readonly rollouts: RolloutRepository;
  /** Autoscaled models: the count the autoscaler set, its last decision, last request and cold start. */
  readonly scale: ScaleRepository;
  /** Several control planes on one database: the leader's lease, who serves, nodes' reports, wake-ups. */
  readonly cluster: ClusterRepository;
  /** Values every control plane on the database shares (the cluster's TLS CA). */
  readonly shared: SharedValueRepository;
  /** Runs work in one transaction: all of it lands, or none. */
  transaction<T>(work: (tx: Store) => Promise<T>): Promise<T>;
  /** A cheap round trip, for health checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Values every control plane on one database shares, made once by whichever starts first
 * (the cluster's TLS CA). Kept in the `meta` table under a `shared/` prefix.
 */
export interface SharedValueRepository {
  get(key: string): Promise<string | undefined>;
  /** Stores `value` unless the key has one already; returns the value that is stored (the first writer's). */
  putIfAbsent(key: string, value: string): Promise<string>;
  /**
   * Replaces the value only while it is still `from` (one transaction: of control planes
   * rewriting it together, one wins); returns the value that is stored after.
   */
  replace(key: string, from: string, to: string): Promise<string>;
}

/** Who made a change, for the audit log: the key's name. */
export type Actor = string;

export interface StoredModel {
  spec: ModelSpec;
  /** Counts changes; an update may ask for the one it read (optimistic concurrency). */
  version: number;
  created_at: string;
  created_by: string;
  updated_at: string;
  updated_by: string;
}

export interface ModelRepository {
  list(): Promise<StoredModel[]>;
  get(name: string): Promise<StoredModel | undefined>;
  /** Refused with `conflict` when the name is taken. */
  create(spec: ModelSpec, actor: Actor): Promise<StoredModel>;
  /**
   * Changes a model under a row lock: `change` sees the current spec and returns the
   * next one (it may throw to refuse). Concurrent updates from any number of control
   * planes apply one after the other, none lost.
   */
  update(
    name: string,
    change: (current: StoredModel) => ModelSpec,
    options: UpdateOptions,
  ): Promise<StoredModel>;
  delete(name: string, actor: Actor): Promise<StoredModel>;
}

/** What a model's source resolved to, when, and what of it is not known. */
export interface ModelOriginRecord {
  model: string;
  /** The source that was resolved: a model whose source differs now is resolved again. */
  source: string;
  /** Null: not resolved (a local path the control plane's machine does not have, a hub that did not answer). */
  origin: Origin | null;
  /** Null: not read; figures it could not read are `unknown` inside it. */
  shape: ModelShape | null;
  /** Why the origin or the shape is not known, in words; null when both are. */
  problem: string | null;
  resolved_at: string;
}

export interface ModelOriginRepository {
  /** By model name. */
  list(): Promise<ModelOriginRecord[]>;
  get(model: string): Promise<ModelOriginRecord | undefined>;
  /** Stores a model's record, replacing the one it had. */
  put(record: ModelOriginRecord): Promise<void>;
  /** Removes a model's record; none is no error. */
  delete(model: string): Promise<void>;
}

export interface UpdateOptions {
  actor: Actor;
  /** Refuse with `conflict` unless the stored version is this one. */
  expectVersion?: number | undefined;
  /** The audit action; `model.update` by default. */
  action?: string;
}

import type { AuditView, KeyView, Role, UsageRow } from '../core/api-types.js';

export type { AuditView, Role };

/** A key as stored: what the API shows of it, and its id. */
export interface ApiKeyRecord extends KeyView {
  id: string;
}

export interface KeyLimits {
  allowed_models?: string[] | null;
  rpm?: number | null;
  tpm?: number | null;
}

export interface NewApiKey extends KeyLimits {
  name: string;
  role: Role;
  prefix: string;
  secretHash: string;
}

export interface KeyRepository {
  /** Refused with `conflict` when an unrevoked key has the name. */
  create(key: NewApiKey, actor: Actor): Promise<ApiKeyRecord>;
  /** The unrevoked key with this secret hash. */
  findActiveByHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  findActiveByName(name: string): Promise<ApiKeyRecord | undefined>;
  list(options?: { includeRevoked?: boolean }): Promise<ApiKeyRecord[]>;
  revoke(name: string, actor: Actor): Promise<ApiKeyRecord>;
  /** Replaces the secret of an unrevoked key (the admin key follows LLMGW_ADMIN_KEY). */
  rotate(name: string, secret: { prefix: string; secretHash: string }, actor: Actor): Promise<ApiKeyRecord>;
  touch(id: string, at: string): Promise<void>;
  /** Changes what a live key may use; audited. */
  setLimits(name: string, limits: KeyLimits, actor: Actor): Promise<ApiKeyRecord>;
}

export interface AuditFilter {
  actor?: string | undefined;
  target?: string | undefined;
  action?: string | undefined;
  /** ISO time: entries at or after it. */
  since?: string | undefined;
  /** Entries with an id below this one, for paging back. */
  before?: number | undefined;
  limit?: number | undefined;
}

export interface AuditRepository {
  record(entry: Omit<AuditView, 'id' | 'at'> & { at?: string }): Promise<void>;
  /** Newest first. */
  list(filter?: AuditFilter): Promise<AuditView[]>;
}

/** A join token as stored: what the API shows of it, its id, and who revoked it. */
export interface JoinTokenRecord extends JoinTokenView {
  id: string;
  revoked_by: string | null;
}

export interface JoinTokenRepository {
  /** Refused with `conflict` when an unrevoked token has the name. */
  create(
    token: { name: string; prefix: string; secretHash: string; expiresAt: string | null },
    actor: Actor,
  ): Promise<JoinTokenRecord>;
  /** The token with this hash, revoked or not (a refusal says which). */
  findByHash(secretHash: string): Promise<JoinTokenRecord | undefined>;
  list(options?: { includeRevoked?: boolean }): Promise<JoinTokenRecord[]>;
  revoke(name: string, actor: Actor): Promise<JoinTokenRecord>;
  noteUse(id: string, at: string): Promise<void>;
}

export interface NodeRecord {
  id: string;
  name: string;
  joined_at: string;
  /** The join token's name. */
  joined_with: string;
  /** Where the agent connected from. */
  address: string;
  agent_version: string;
  inventory: NodeInventory;
  inventory_at: string;
  last_seen_at: string;
}

export interface NodeRepository {
  list(): Promise<NodeRecord[]>;
  get(id: string): Promise<NodeRecord | undefined>;
  getByName(name: string): Promise<NodeRecord | undefined>;
  findCredential(id: string): Promise<{ secretHash: string } | undefined>;
  /**
   * Joins a node (or joins it again with a new credential): one transaction that
   * checks the token is still live, counts its use, and audits the join.
   */
  join(
    node: Omit<NodeRecord, 'joined_at' | 'inventory_at' | 'last_seen_at'> & {
      secretHash: string;
      tokenId: string;
    },
    at: string,
  ): Promise<NodeRecord>;
  /** Many joins in one transaction; a node's refusal is its outcome, the others still join. */
  joinMany(
    nodes: readonly (Omit<NodeRecord, 'joined_at' | 'inventory_at' | 'last_seen_at'> & {
      secretHash: string;
      tokenId: string;
    })[],
    at: string,
  ): Promise<(NodeRecord | LlmgwError)[]>;
  updateInventory(id: string, inventory: NodeInventory, at: string): Promise<void>;
  /** Agents back with their node credential: inventories, addresses and when seen, in one transaction. */
  reconnected(
    nodes: readonly { id: string; inventory: NodeInventory; address: string; at: string }[],
  ): Promise<void>;
  /** Records when nodes were last heard from, many at once. */
  touch(seen: readonly { id: string; at: string; address?: string }[]): Promise<void>;
  remove(name: string, actor: Actor): Promise<NodeRecord>;
}

export interface ReplicaRecord {
  id: string;
  model: string;
  profile: string;
  created_at: string;
  /**
   * The key its engine requires (only the gateway uses it), sealed with a secret kept
   * outside the database (server/fleets/engine-keys.ts); in a database from before
   * migration 0005, until the control plane seals it, the key itself.
   */
  sealed_key: string;
  /** The model as it was when the replica was placed: a changed model rolls replicas over, one at a time. */
  spec: ModelSpec;
  /** Replaced: it stops once its successor is ready (a restart). */
  retiring: boolean;
  retire_reason: string | null;
  /** When it was marked to be replaced: replicas created since stand in for it. */
  retiring_since: string | null;
}

export interface FleetChange {
  add: { replica: ReplicaRecord; shards: Shard[] }[];
  /** Replica ids to remove, with their shards, and why (for the audit log). */
  remove: { id: string; reason: string }[];
}

export interface FleetRepository {
  replicas(): Promise<ReplicaRecord[]>;
  shards(): Promise<Shard[]>;
  /** Adds and removes replicas in one transaction, auditing each as `actor`. */
  apply(change: FleetChange, actor: Actor): Promise<void>;
  /**
   * Marks a replica to be replaced: a new one is placed beside it, and it stops once that
   * one is ready. A null reason takes that back (no room for the new one).
   */
  retire(id: string, reason: string | null, actor: Actor): Promise<void>;
  /** Replaces replicas' sealed keys (keys stored before they were sealed, sealed now). */
  reseal(keys: readonly { id: string; sealed_key: string }[]): Promise<void>;
  /**
   * The check value of the secret engine keys are sealed with: stores `value` unless one
   * is stored already, and returns the one stored.
   */
  keyCheck(value: string): Promise<string>;
  /** The next replica numbers of a model: ids are never reused, so logs and audit stay unambiguous. */
  nextReplicaNumbers(model: string, count: number): Promise<number[]>;
  /**
   * Runs work holding the cluster's placement lock: one control plane places at a time,
   * over the database they share, and each sees the others' shards.
   */
  locked<T>(work: (tx: Store) => Promise<T>): Promise<T>;
}

/**
 * A change rolling over a model's replicas, the latest of each model: kept so that a roll
 * goes on (in place, one replica at a time) after the control plane restarts.
 */
export interface RolloutRecord {
  model: string;
  /** In words: `gpus 1 → 2`, `restart of qwen-3`. */
  change: string;
  mode: 'surge' | 'in-place';
  /** The key that made the change. */
  by: Actor;
  /** The model it rolls to: a model changed again since is another change, not this one. */
  spec: ModelSpec;
  /** The replica restarted (`ctl replica restart`); null for a change of the model. */
  replica: string | null;
  /** Replicas it restarts: those that did not run `spec` when it started (1 for a restart). */
  replaces: number;
  /**
   * How many of the model's replicas ran each profile when it started (those not being
   * replaced already): each successor runs its predecessor's profile, also in place, where
   * the predecessor is gone before its successor is placed. Empty for older rollouts.
   */
  profiles: Record<string, number>;
  started_at: string;
  state: 'rolling' | 'done' | 'failed';
  finished_at: string | null;
  /** When failed: the replica and its engine's last error. */
  error: string | null;
}

export interface RolloutRepository {
  /** By model name. */
  list(): Promise<RolloutRecord[]>;
  get(model: string): Promise<RolloutRecord | undefined>;
  /** Starts a model's rollout (state rolling), replacing the one it had. */
  start(record: Omit<RolloutRecord, 'state' | 'finished_at' | 'error'>): Promise<void>;
  /**
   * Ends a model's rollout started at `startedAt`, auditing its end as `actor`; false (and
   * nothing written) when that rollout is no longer rolling (another control plane ended it,
   * or a newer one replaced it).
   */
  finish(
    model: string,
    startedAt: string,
    end: { state: 'done' } | { state: 'failed'; error: string },
    actor: Actor,
  ): Promise<boolean>;
}

/** One decision of the autoscaler: what it changed, why, and the figures it saw. */
export interface ScaleDecision {
  at: string;
  from: number;
  to: number;
  direction: 'up' | 'down' | 'zero' | 'wake';
  reason: string;
  figures: Record<string, number>;
}

/** An autoscaled model's state, kept by the leading control plane. */
export interface ModelScaleRecord {
  model: string;
  /** The count placement runs now. */
  replicas: number;
  /** The last change it made; null before the first. */
  decision: ScaleDecision | null;
  last_request_at: string | null;
  /** The last cold start the gateways measured: first request to first token at zero. */
  cold_start: { ms: number; at: string } | null;
  updated_at: string;
}

export interface ScaleRepository {
  list(): Promise<ModelScaleRecord[]>;
  get(model: string): Promise<ModelScaleRecord | undefined>;
  /**
   * Writes a model's state (insert or replace); with `audit`, its decision is audited as
   * `model.scale` by `audit.actor` in the same transaction.
   */
  put(record: Omit<ModelScaleRecord, 'updated_at'>, audit?: { actor: Actor }): Promise<void>;
  remove(model: string): Promise<void>;
}

/** Counts to add, or the counts stored: one key, model and hour. */
export type UsageDelta = UsageRow;

export interface UsageFilter {
  key?: string | undefined;
  model?: string | undefined;
  /** ISO time: hours starting at or after it (the hour it falls in included). */
  since?: string | undefined;
}

export interface UsageRepository {
  /** Adds counts, many rows in one transaction (the gateway writes in batches). */
  add(rows: readonly UsageDelta[]): Promise<void>;
  /** Per key, model and hour, newest hour first. */
  list(filter?: UsageFilter): Promise<UsageDelta[]>;
}

/** A lease: held by `holder` until `expires_at`; `token` grows each time it changes hands. */
export interface LeaseRecord {
  name: string;
  holder: string;
  /** The fencing token: a write checked against it is refused once another holder took over. */
  token: number;
  /** Since when the holder has held it without a break. */
  since: string;
  expires_at: string;
}

/** What a lease holder's writes are checked against. */
export interface Fence {
  lease: string;
  holder: string;
  token: number;
}

/** A fenced write by a holder whose lease was lost (expired, or taken over): nothing was written. */
export class LeaseLost extends LlmgwError {
  constructor(message: string) {
    super('conflict', message);
    this.name = 'LeaseLost';
  }
}

export interface ControlPlaneRecord {
  id: string;
  /** Where it serves (its API, gateway and agent channel). */
  url: string;
  version: string;
  started_at: string;
  /** Its last sign of life; a control plane silent past its lease is shown as gone. */
  seen_at: string;
}

export interface NodeReportRecord {
  /** The node's id. */
  node: string;
  /** The control plane its agent reported to. */
  by: string;
  at: string;
  /** The agent's last shard report (JSON, as the fleet keeps it). */
  report: unknown;
}

/** What control planes wake each other for: placement changed, a node reported, the catalog changed. */
export type ClusterChannel = 'fleet' | 'reports' | 'models' | 'nodes';

export interface ClusterRepository {
  /**
   * Takes `name` for `holder` for `ttlMs` when it is free, expired or already the holder's
   * (renewing it); the database's clock decides. Answers whether it is held and the lease
   * as it now is; a change of hands increments the token.
   */
  claimLease(name: string, holder: string, ttlMs: number): Promise<{ held: boolean; lease: LeaseRecord }>;
  /** Gives the lease up now (a clean stop), so another takes over without waiting for it to expire. */
  releaseLease(name: string, holder: string): Promise<void>;
  lease(name: string): Promise<LeaseRecord | undefined>;
  /**
   * Refuses (LeaseLost) unless the fence's holder still holds the lease with its token and
   * it has not expired. Run inside the transaction whose writes it guards: the lease row is
   * locked until it commits, so no new holder's term begins before those writes land.
   */
  checkFence(fence: Fence): Promise<void>;
  /** Records a control plane as serving (insert or refresh). */
  announce(cp: ControlPlaneRecord): Promise<void>;
  controlPlanes(): Promise<ControlPlaneRecord[]>;
  /** A control plane that stopped cleanly. */
  forget(id: string): Promise<void>;
  putReport(record: NodeReportRecord): Promise<void>;
  reports(): Promise<NodeReportRecord[]>;
  removeReport(node: string): Promise<void>;
  /** A value the leader shares with the other control planes (the replicas it could not place). */
  putState(key: string, value: string): Promise<void>;
  state(key: string): Promise<string | undefined>;
  /**
   * Wakes every control plane listening on `channel` (itself included). In a transaction it
   * is sent when that commits (PostgreSQL NOTIFY), not before.
   */
  notify(channel: ClusterChannel, payload?: string): Promise<void>;
  /**
   * Calls `fn` on each notification of `channel`, and with `resync` after the listening
   * connection was lost and is back (notifications may have been missed: read everything).
   */
  listen(channel: ClusterChannel, fn: (payload: string) => void): () => void;
}

/** The payload a listener gets when it may have missed notifications. */
export const resyncPayload = 'resync';
