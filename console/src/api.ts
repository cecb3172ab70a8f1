/**
 * The console's client of /api/v1. Types come from the server's own wire types, imported as
 * types only: nothing of the server is bundled into the console.
 */
import type { ErrorBody, ListOf, Role, WhoAmI } from '../../src/core/api-types.js';
import type { ClusterStatus, NodeView } from '../../src/protocol/node-views.js';
import type { ReplicaView } from '../../src/protocol/replica-views.js';
import type { TrafficView } from '../../src/protocol/traffic-views.js';
import type { AuditView, ConfigChangeView, CreatedKey, KeyView, UsageRow } from '../../src/core/api-types.js';
import type { ModelChange, ModelRead, ModelUseView, ModelView } from '../../src/protocol/model-views.js';
import type { GpusSideView, ModelGpusCheck, ModelGpusView } from '../../src/protocol/model-gpus-views.js';
import type { RolloutView } from '../../src/protocol/rollout-views.js';
import type { PlanAnswer, PlanOption } from '../../src/planner/options.js';
import type { ContextChangeView } from '../../src/server/services/model-context.js';

export type { ClusterStatus, ListOf, NodeView, ReplicaView, Role, TrafficView, WhoAmI };
export type {
  ContextChangeView,
  GpusSideView,
  ModelChange,
  ModelGpusCheck,
  ModelGpusView,
  ModelRead,
  ModelUseView,
  ModelView,
  PlanAnswer,
  PlanOption,
  RolloutView,
};

export type { AuditView, ConfigChangeView, CreatedKey, KeyView, UsageRow };

/** The body of POST /keys (create) and, without name and role, of PATCH /keys/NAME. */
export interface KeyLimitsBody {
  /** null: every model. */
  models?: string[] | null;
  rpm?: number | null;
  tpm?: number | null;
}

/** The settings file as GET /config sends it: the text (secrets hidden) and its version tag. */
export interface ConfigText {
  text: string;
  etag: string;
  path: string;
  overriddenByEnv: string[];
}

/** What POST /plan takes: one of model, spec or source (src/server/api/plan.ts). */
export interface PlanAsk {
  model?: string;
  spec?: unknown;
  source?: string;
  context?: number;
  classes?: string[];
}
// Nodes and Replicas views.
import type { Device, ExcludedCard } from '../../src/gpu/types.js';
import type { CreatedJoinToken } from '../../src/protocol/node-views.js';
import type { RestartResult, ShardView } from '../../src/protocol/replica-views.js';
export type { CreatedJoinToken, Device, ExcludedCard, RestartResult, ShardView };

export const apiBase = '/api/v1';

/** A refusal of the control plane (its code and message as sent), or why it could not be reached. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly issues: NonNullable<ErrorBody['error']['issues']>;
  constructor(o: { status: number; code: string; message: string; issues?: ApiError['issues'] }) {
    super(o.message);
    this.name = 'ApiError';
    this.status = o.status;
    this.code = o.code;
    this.issues = o.issues ?? [];
  }
}

export interface ApiOptions {
  key: string;
  /** Tests pass their own; the browser's otherwise. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  method?: string;
  json?: unknown;
  signal?: AbortSignal;
}

function isErrorBody(v: unknown): v is ErrorBody {
  const e = (v as { error?: { message?: unknown } } | null)?.error;
  return typeof e?.message === 'string';
}

/** The server's error body as an ApiError; anything else (a proxy's page) by its status. */
export async function errorOf(res: Response): Promise<ApiError> {
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  if (isErrorBody(body)) {
    return new ApiError({
      status: res.status,
      code: body.error.code,
      message: body.error.message,
      ...(body.error.issues === undefined ? {} : { issues: body.error.issues }),
    });
  }
  return new ApiError({
    status: res.status,
    code: 'http_error',
    message: `the control plane answered ${res.status} ${res.statusText} without a message`,
  });
}

/** One key's client of the API: every call sends it as a bearer token. */
export class Api {
  readonly #key: string;
  readonly #fetch: typeof fetch;

  constructor(o: ApiOptions) {
    this.#key = o.key;
    this.#fetch = o.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** GET or send JSON to a path under /api/v1; resolves with the parsed answer, rejects with ApiError. */
  async request<T>(path: string, o: RequestOptions = {}): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#key}` };
    if (o.json !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await this.#fetch(`${apiBase}${path}`, {
        method: o.method ?? 'GET',
        headers,
        ...(o.json === undefined ? {} : { body: JSON.stringify(o.json) }),
        ...(o.signal === undefined ? {} : { signal: o.signal }),
      });
    } catch (e) {
      if (o.signal?.aborted === true) throw e;
      throw new ApiError({
        status: 0,
        code: 'unreachable',
        message: `cannot reach the control plane: ${e instanceof Error ? e.message : String(e)}`,
      });
    }
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as T;
  }

  /** Opens the server-sent events stream (live.ts reads it). */
  events(signal: AbortSignal): Promise<Response> {
    return this.#fetch(`${apiBase}/events`, {
      headers: { authorization: `Bearer ${this.#key}`, accept: 'text/event-stream' },
      signal,
    });
  }

  whoami(): Promise<WhoAmI> {
    return this.request<WhoAmI>('/whoami');
  }

  nodes(): Promise<NodeView[]> {
    return this.request<ListOf<NodeView>>('/nodes').then((l) => l.items);
  }

  status(): Promise<ClusterStatus> {
    return this.request<ClusterStatus>('/status');
  }

  replicas(): Promise<ReplicaView[]> {
    return this.request<ListOf<ReplicaView>>('/replicas').then((l) => l.items);
  }

  /** Every key, revoked ones included (admin). */
  keys(): Promise<KeyView[]> {
    return this.request<ListOf<KeyView>>('/keys?revoked=true').then((l) => l.items);
  }

  createKey(body: KeyLimitsBody & { name: string; role: Role }): Promise<CreatedKey> {
    return this.request<CreatedKey>('/keys', { method: 'POST', json: body });
  }

  updateKey(name: string, body: KeyLimitsBody): Promise<KeyView> {
    return this.request<KeyView>(`/keys/${encodeURIComponent(name)}`, { method: 'PATCH', json: body });
  }

  revokeKey(name: string): Promise<KeyView> {
    return this.request<KeyView>(`/keys/${encodeURIComponent(name)}`, { method: 'DELETE' });
  }

  /** `query` as views/usage-series.ts builds it ('' or '?key=…'). */
  usage(query: string): Promise<UsageRow[]> {
    return this.request<ListOf<UsageRow>>(`/usage${query}`).then((l) => l.items);
  }

  /** `query` as views/audit-filter.ts builds it; newest first. */
  audit(query: string): Promise<AuditView[]> {
    return this.request<ListOf<AuditView>>(`/audit${query}`).then((l) => l.items);
  }

  /** The settings file as text, with the tag a save sends back as If-Match. */
  async getConfig(): Promise<ConfigText> {
    const res = await this.#send('/config', { headers: { accept: 'application/yaml' } });
    return {
      text: await res.text(),
      etag: res.headers.get('etag') ?? '',
      path: res.headers.get('x-llmgw-config-path') ?? '',
      overriddenByEnv: (res.headers.get('x-llmgw-overridden-by-env') ?? '')
        .split(',')
        .filter((s) => s !== ''),
    };
  }

  /** Replaces the settings file; the server validates it first and refuses a stale `etag`. */
  async putConfig(text: string, etag: string): Promise<ConfigChangeView> {
    const res = await this.#send('/config', {
      method: 'PUT',
      headers: { 'content-type': 'application/yaml', ...(etag === '' ? {} : { 'if-match': etag }) },
      body: text,
    });
    return (await res.json()) as ConfigChangeView;
  }

  /** A request whose body or answer is not JSON; refusals become ApiError as in `request`. */
  async #send(path: string, init: { method?: string; headers: Record<string, string>; body?: string }) {
    let res: Response;
    try {
      res = await this.#fetch(`${apiBase}${path}`, {
        ...init,
        headers: { ...init.headers, authorization: `Bearer ${this.#key}` },
      });
    } catch (e) {
      throw new ApiError({
        status: 0,
        code: 'unreachable',
        message: `cannot reach the control plane: ${e instanceof Error ? e.message : String(e)}`,
      });
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  /** The whole models to an admin key; to another key, what a client of each needs (ModelUseView). */
  models(): Promise<ModelRead[]> {
    return this.request<ListOf<ModelRead>>('/models').then((l) => l.items);
  }

  /** One model, with its rolling change (status.rollout); a ModelUseView to a key that is not admin. */
  model(name: string): Promise<ModelRead> {
    return this.request<ModelRead>(`/models/${encodeURIComponent(name)}`);
  }

  /** A model definition as `ctl model add -f` sends it (the parsed YAML); warnings in the answer. */
  addModel(spec: unknown): Promise<ModelChange> {
    return this.request<ModelChange>('/models', { method: 'POST', json: spec });
  }

  /** Replicas wanted (`ctl model scale`): a PATCH of the one field. */
  scaleModel(name: string, replicas: number): Promise<ModelChange> {
    return this.request<ModelChange>(`/models/${encodeURIComponent(name)}`, {
      method: 'PATCH',
      json: { replicas },
    });
  }

  removeModel(name: string): Promise<unknown> {
    return this.request<unknown>(`/models/${encodeURIComponent(name)}`, { method: 'DELETE' });
  }

  /** Cards a replica uses; with dry_run the server's check only (nothing stored or rolled). */
  modelGpus(
    name: string,
    body: { gpus: number; profile?: string; in_place?: boolean; dry_run: true },
  ): Promise<ModelGpusCheck>;
  modelGpus(
    name: string,
    body: { gpus: number; profile?: string; in_place?: boolean; dry_run?: false },
  ): Promise<ModelGpusView>;
  modelGpus(
    name: string,
    body: { gpus: number; profile?: string; in_place?: boolean; dry_run?: boolean },
  ): Promise<ModelGpusView | ModelGpusCheck> {
    return this.request(`/models/${encodeURIComponent(name)}/gpus`, { method: 'POST', json: body });
  }

  modelContext(
    name: string,
    body: { tokens: number; slots?: number; in_place?: boolean },
  ): Promise<ContextChangeView> {
    return this.request<ContextChangeView>(`/models/${encodeURIComponent(name)}/context`, {
      method: 'POST',
      json: body,
    });
  }

  /** The planner's options (`ctl plan`): a model of the catalog by GET, a spec or a source by POST. */
  plan(ask: PlanAsk): Promise<PlanAnswer> {
    if (ask.model !== undefined && ask.spec === undefined && ask.source === undefined) {
      const q = new URLSearchParams({ model: ask.model });
      if (ask.context !== undefined) q.set('context', String(ask.context));
      if (ask.classes !== undefined && ask.classes.length > 0) q.set('class', ask.classes.join(','));
      return this.request<PlanAnswer>(`/plan?${q.toString()}`);
    }
    return this.request<PlanAnswer>('/plan', { method: 'POST', json: ask });
  }

  /** The gateway's rates over the last hour (a point every 10 s). */
  traffic(): Promise<TrafficView> {
    return this.request<TrafficView>('/traffic');
  }

  /** Removes a node: its agent is disconnected and must join again with a token. */
  removeNode(name: string): Promise<{ name: string; id: string }> {
    return this.request(`/nodes/${encodeURIComponent(name)}`, { method: 'DELETE' });
  }

  /** A join token; its secret is in this answer only. */
  createJoinToken(o: { name?: string; expires_in?: number }): Promise<CreatedJoinToken> {
    return this.request('/node-tokens', { method: 'POST', json: o });
  }

  replica(id: string): Promise<ReplicaView> {
    return this.request(`/replicas/${encodeURIComponent(id)}`);
  }

  /** Beside it (surge), or in place (stopped first). */
  restartReplica(id: string, inPlace: boolean): Promise<RestartResult> {
    return this.request(`/replicas/${encodeURIComponent(id)}/restart`, {
      method: 'POST',
      json: { in_place: inPlace },
    });
  }

  /**
   * A shard's engine log as a text stream (following: until `signal` aborts, like
   * `ctl logs -f`); rejects with the server's refusal before the stream starts.
   */
  async logs(
    id: string,
    o: { rank: number; tail: number; follow: boolean; signal: AbortSignal },
  ): Promise<ReadableStream<Uint8Array>> {
    const q = new URLSearchParams({ rank: String(o.rank), tail: String(o.tail), follow: String(o.follow) });
    let res: Response;
    try {
      res = await this.#fetch(`${apiBase}/replicas/${encodeURIComponent(id)}/logs?${q.toString()}`, {
        headers: { authorization: `Bearer ${this.#key}` },
        signal: o.signal,
      });
    } catch (e) {
      if (o.signal.aborted) throw e;
      throw new ApiError({
        status: 0,
        code: 'unreachable',
        message: `cannot reach the control plane: ${e instanceof Error ? e.message : String(e)}`,
      });
    }
    if (!res.ok) throw await errorOf(res);
    if (res.body === null)
      throw new ApiError({ status: res.status, code: 'http_error', message: 'the log answer had no body' });
    return res.body;
  }

  /** The gateway's models and adapters this key may use (GET /v1/models, same origin). */
  async gatewayModels(): Promise<GatewayModel[]> {
    const res = await this.#gateway('/v1/models', { method: 'GET' });
    return ((await res.json()) as { data: GatewayModel[] }).data;
  }

  /**
   * POST /v1/chat/completions; resolves with the answer, whose body the caller reads (a stream),
   * or rejects with the gateway's refusal as an ApiError.
   */
  chat(body: unknown, signal: AbortSignal): Promise<Response> {
    return this.#gateway('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
  }

  async #gateway(path: string, init: RequestInit): Promise<Response> {
    let res: Response;
    try {
      res = await this.#fetch(path, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${this.#key}` },
      });
    } catch (e) {
      if (init.signal?.aborted === true) throw e;
      throw new ApiError({
        status: 0,
        code: 'unreachable',
        message: `cannot reach the gateway: ${e instanceof Error ? e.message : String(e)}`,
      });
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }
}

/** An entry of the gateway's GET /v1/models (src/gateway/gateway.ts): a model, or MODEL:ADAPTER with its parent. */
export interface GatewayModel {
  id: string;
  parent?: string;
  ready_replicas: number;
  context_length?: number;
}

/**
 * TanStack Query keys, one per resource. live.ts invalidates them by topic, so every view
 * that reads a resource through these keys follows the cluster without polling.
 */
export const queryKeys = {
  nodes: ['nodes'],
  status: ['status'],
  replicas: ['replicas'],
  models: ['models'],
  rollouts: ['rollouts'],
  keys: ['keys'],
  config: ['config'],
  usage: ['usage'],
  audit: ['audit'],
  model: (name: string) => ['models', name] as const,
  plan: (ask: PlanAsk) => ['plan', ask] as const,
  traffic: ['traffic'],
  replica: (id: string) => ['replicas', id] as const,
  gatewayModels: ['gateway-models'],
} as const;
