/**
 * What the control plane's API sends, shared by the server and its clients: the shapes that
 * need nothing above core. Views of catalog, node and replica types are in src/protocol.
 */

/**
 * admin: everything. user: reads, and the gateway. gateway: what a gateway of its own needs.
 * metrics: reads /metrics only (a Prometheus scraper's key).
 */
export const roles = ['admin', 'user', 'gateway', 'metrics'] as const;
export type Role = (typeof roles)[number];

export interface KeyView {
  name: string;
  role: Role;
  prefix: string;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
  revoked_by: string | null;
  last_used_at: string | null;
  /** Models it may use through the gateway; null: all. */
  allowed_models: string[] | null;
  /** Requests and tokens per minute through the gateway; null: no limit. */
  rpm: number | null;
  tpm: number | null;
}

export interface CreatedKey {
  key: KeyView;
  /** Shown once: only its hash is kept. */
  secret: string;
}

/** One entry of the audit log, as the store keeps it and GET /audit answers it. */
export interface AuditView {
  id: number;
  at: string;
  actor: string;
  action: string;
  target: string;
  detail: Record<string, unknown>;
}

export interface ConfigChangeView {
  changed: boolean;
  applied: string[];
  restart_required: string[];
  /** Keys set from the environment, which still win over what was written. */
  overridden_by_env: string[];
}

export interface WhoAmI {
  name: string;
  role: Role;
}

export interface HealthView {
  status: 'ok' | 'unavailable';
  version: string;
  store: 'sqlite' | 'postgres';
  error?: string;
}

/** One hour's requests and tokens of one key and model through the gateway. */
export interface UsageRow {
  key_name: string;
  model: string;
  /** The hour, as an ISO time at its start. */
  hour: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
}

export interface ListOf<T> {
  items: T[];
}

/** Every refusal on the wire. */
export interface ErrorBody {
  error: { code: string; message: string; issues?: { path: string; message: string; line?: number }[] };
}
