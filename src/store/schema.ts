import type { Generated } from 'kysely';

import type { UsageRow } from '../core/api-types.js';

/** The tables as Kysely sees them. Times are ISO-8601 UTC text, which sorts as it reads. */
export interface Database {
  meta: { key: string; value: string };
  models: {
    name: string;
    spec: string;
    version: number;
    created_at: string;
    created_by: string;
    updated_at: string;
    updated_by: string;
  };
  audit_log: {
    id: Generated<number>;
    at: string;
    actor: string;
    action: string;
    target: string;
    detail: string;
  };
  api_keys: {
    id: string;
    name: string;
    role: string;
    secret_hash: string;
    prefix: string;
    created_at: string;
    created_by: string;
    revoked_at: string | null;
    revoked_by: string | null;
    last_used_at: string | null;
    /** JSON list of model names, or null for every model. */
    allowed_models: string | null;
    rpm: number | null;
    tpm: number | null;
  };
  join_tokens: {
    id: string;
    name: string;
    secret_hash: string;
    prefix: string;
    created_at: string;
    created_by: string;
    expires_at: string | null;
    revoked_at: string | null;
    revoked_by: string | null;
    last_used_at: string | null;
    uses: Generated<number>;
  };
  nodes: {
    id: string;
    name: string;
    secret_hash: string;
    joined_at: string;
    joined_with: string;
    address: string;
    agent_version: string;
    inventory: string;
    inventory_at: string;
    last_seen_at: string;
  };
  replicas: {
    id: string;
    model: string;
    profile: string;
    created_at: string;
    sealed_key: string;
    spec: string;
    retiring: number;
    retire_reason: string | null;
    retiring_since: string | null;
  };
  shards: {
    replica: string;
    rank: number;
    ranks: number;
    model: string;
    profile: string;
    node: string;
    devices: string;
    port: number;
    dist_port: number | null;
    threads: number | null;
    memory_mib: number | null;
  };
  model_origins: {
    model: string;
    source: string;
    /** JSON: models/origin.ts Origin. */
    origin: string | null;
    /** JSON: models/shape.ts ModelShape. */
    shape: string | null;
    problem: string | null;
    resolved_at: string;
  };
  /** The latest rollout of each model (store.ts RolloutRecord). */
  rollouts: {
    model: string;
    change: string;
    mode: string;
    by_actor: string;
    /** JSON: the ModelSpec it rolls to. */
    spec: string;
    replica: string | null;
    replaces: number;
    /** JSON: each profile's replicas when it started; null for rollouts older than this column. */
    profiles: string | null;
    started_at: string;
    state: string;
    finished_at: string | null;
    error: string | null;
  };
  /** Leases with fencing tokens: `leader` is the control plane that places (store.ts ClusterRepository). */
  leases: { name: string; holder: string; token: number; since: string; expires_at: string };
  /** The control planes serving on this database, as each last said. */
  control_planes: { id: string; url: string; version: string; started_at: string; seen_at: string };
  /** Each node's last shard report (JSON), written by the control plane its agent talks to. */
  node_reports: { node: string; by_cp: string; at: string; report: string };
  /** Each autoscaled model's count and last decision (store.ts ModelScaleRecord). */
  model_scale: {
    model: string;
    replicas: number;
    /** JSON: store.ts ScaleDecision. */
    decision: string | null;
    decided_at: string | null;
    last_request_at: string | null;
    cold_start_ms: number | null;
    cold_start_at: string | null;
    updated_at: string;
  };
  /** One row per key, model and hour (`hour`: the ISO time the hour starts). */
  usage: UsageRow;
}
