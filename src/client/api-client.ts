import type {
  AuditView,
  ConfigChangeView,
  CreatedKey,
  ErrorBody,
  HealthView,
  KeyView,
  ListOf,
  Role,
  UsageRow,
  WhoAmI,
} from '../core/api-types.js';
import type { PlanAnswer } from '../planner/index.js';
import type { CacheView, ModelDownloads, PullStarted, PurgeResult } from '../protocol/cache-views.js';
import type { ModelChange, ModelRead, ModelView } from '../protocol/model-views.js';
import type { ClusterStatus, CreatedJoinToken, JoinTokenView, NodeView } from '../protocol/node-views.js';
import type { ReplicaView, RestartResult } from '../protocol/replica-views.js';
import { errorStatus, LlmgwError, type ErrorCode, type Issue } from '../core/errors.js';

import { answerCut, answerLost, failureOf, wasNeverSent } from './lost-answer.js';

export interface ApiClientOptions {
  /** The control plane's base URL: `http://127.0.0.1:8080`. */
  server: string;
  key?: string | undefined;
  timeoutMs?: number;
  /** What requests go through: one that trusts the cluster's CA for https (tls/trust.ts); the global fetch unless given. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  json?: unknown;
  text?: string;
  contentType?: string;
  headers?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  /** Longer than the client's own for calls that wait on the network beyond the control plane. */
  timeoutMs?: number;
}

/** Adding or changing a model resolves its source at the hub first (a minute at most, server side). */
const resolvingMs = 120_000;

export interface ApiResponse<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** Limits of a key through the gateway; null clears one. */
export interface KeyLimitsBody {
  models?: string[] | null;
  rpm?: number | null;
  tpm?: number | null;
}

/** What to plan: one of a model of the catalog, a model definition or a source; classes default to the cluster's. */
export interface PlanRequest {
  model?: string | undefined;
  spec?: unknown;
  source?: string | undefined;
  context?: number | undefined;
  classes?: readonly string[] | undefined;
}

/** A refusal from the control plane, with its code, HTTP status and message as sent. */
export class ApiError extends LlmgwError {
  readonly httpStatus: number;
  constructor(httpStatus: number, code: ErrorCode, message: string, issues: Issue[]) {
    super(code, message, { issues });
    this.name = 'ApiError';
    this.httpStatus = httpStatus;
  }
}

/** The typed client of /api/v1, used by llmgw ctl, the agent and the console. */
export class ApiClient {
  readonly server: string;
  readonly #key: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: ApiClientOptions) {
    this.#fetch = options.fetch ?? fetch;
    this.server = options.server.replace(/\/+$/, '');
    this.#key = options.key;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
    const url = new URL(`${this.server}/api/v1${path}`);
    for (const [k, v] of Object.entries(options.query ?? {}))
      if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (this.#key !== undefined) headers['authorization'] = `Bearer ${this.#key}`;
    let body: string | undefined;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.text !== undefined) {
      headers['content-type'] = options.contentType ?? 'text/plain';
      body = options.text;
    }
    let res: Response;
    try {
      res = await this.#fetch(url, {
        method,
        headers,
        body,
        signal: AbortSignal.timeout(Math.max(this.#timeoutMs, options.timeoutMs ?? 0)),
      });
    } catch (e) {
      // A refusal of the server's certificate says what to do itself.
      if (e instanceof LlmgwError) throw e;
      if (wasNeverSent(e)) throw unreachable(this.server, e);
      throw answerLost({ server: this.server, method, path, error: e });
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw answerCut({ server: this.server, method, path, status: res.status, error: e });
    }
    const isJson = (res.headers.get('content-type') ?? '').includes('json');
    if (!res.ok) throw toApiError(res.status, text, isJson);
    return {
      status: res.status,
      headers: res.headers,
      body: (isJson && text !== '' ? JSON.parse(text) : text) as T,
    };
  }

  async health(): Promise<HealthView> {
    return (await this.request<HealthView>('GET', '/health')).body;
  }
  async whoami(): Promise<WhoAmI> {
    return (await this.request<WhoAmI>('GET', '/whoami')).body;
  }
  /** The whole model to an admin key; to another key, what a client of it needs (ModelUseView). */
  async listModels(): Promise<ModelRead[]> {
    return (await this.request<ListOf<ModelRead>>('GET', '/models')).body.items;
  }
  async getModel(name: string): Promise<ModelRead> {
    return (await this.request<ModelRead>('GET', `/models/${encodeURIComponent(name)}`)).body;
  }
  /** GET /plan for a model of the catalog; POST /plan for a definition or a source (resolved at the hub, not stored). */
  async plan(req: PlanRequest): Promise<PlanAnswer> {
    const classes = req.classes === undefined || req.classes.length === 0 ? undefined : req.classes;
    if (req.model !== undefined && req.spec === undefined && req.source === undefined) {
      const query = { model: req.model, context: req.context, class: classes?.join(',') };
      return (await this.request<PlanAnswer>('GET', '/plan', { query })).body;
    }
    const json = {
      ...(req.model === undefined ? {} : { model: req.model }),
      ...(req.spec === undefined ? {} : { spec: req.spec }),
      ...(req.source === undefined ? {} : { source: req.source }),
      ...(req.context === undefined ? {} : { context: req.context }),
      ...(classes === undefined ? {} : { classes }),
    };
    return (await this.request<PlanAnswer>('POST', '/plan', { json, timeoutMs: resolvingMs })).body;
  }
  async addModel(spec: unknown): Promise<ModelChange> {
    return (await this.request<ModelChange>('POST', '/models', { json: spec, timeoutMs: resolvingMs })).body;
  }
  async replaceModel(name: string, spec: unknown): Promise<ModelChange> {
    return (
      await this.request<ModelChange>('PUT', `/models/${encodeURIComponent(name)}`, {
        json: spec,
        timeoutMs: resolvingMs,
      })
    ).body;
  }
  async patchModel(name: string, patch: unknown): Promise<ModelChange> {
    return (
      await this.request<ModelChange>('PATCH', `/models/${encodeURIComponent(name)}`, {
        json: patch,
        timeoutMs: resolvingMs,
      })
    ).body;
  }
  /** Resolves a model's source again (re-pins it to the commit its revision points at now). */
  async resolveModel(name: string): Promise<ModelView> {
    return (
      await this.request<ModelView>('POST', `/models/${encodeURIComponent(name)}/resolve`, {
        timeoutMs: resolvingMs,
      })
    ).body;
  }
  async deleteModel(name: string): Promise<ModelView> {
    return (await this.request<ModelView>('DELETE', `/models/${encodeURIComponent(name)}`)).body;
  }
  /** Removes a model and (purge) its files from every node and the mirror. */
  async removeModel(name: string, o: { purge: boolean }): Promise<ModelView & { purge?: PurgeResult }> {
    return (
      await this.request<ModelView & { purge?: PurgeResult }>(
        'DELETE',
        `/models/${encodeURIComponent(name)}`,
        {
          query: { purge: o.purge ? 'true' : undefined },
        },
      )
    ).body;
  }
  /** Starts fetching a model's files onto nodes (none named: every ready node). */
  async pullModel(name: string, nodes: readonly string[] = []): Promise<PullStarted> {
    return (
      await this.request<PullStarted>('POST', `/models/${encodeURIComponent(name)}/pull`, {
        json: nodes.length === 0 ? {} : { nodes },
      })
    ).body;
  }
  /** How far each node is with a model's files. */
  async modelDownloads(name: string): Promise<ModelDownloads> {
    return (await this.request<ModelDownloads>('GET', `/models/${encodeURIComponent(name)}/downloads`)).body;
  }
  /** What each node's cache (or the one named) and the mirror hold. */
  async cache(node?: string): Promise<CacheView> {
    return (await this.request<CacheView>('GET', '/cache', { query: { node } })).body;
  }
  async listKeys(includeRevoked = false): Promise<KeyView[]> {
    return (
      await this.request<ListOf<KeyView>>('GET', '/keys', {
        query: { revoked: includeRevoked ? 'true' : undefined },
      })
    ).body.items;
  }
  async createKey(name: string, role: Role, limits: KeyLimitsBody = {}): Promise<CreatedKey> {
    return (await this.request<CreatedKey>('POST', '/keys', { json: { name, role, ...limits } })).body;
  }
  async updateKey(name: string, limits: KeyLimitsBody): Promise<KeyView> {
    return (await this.request<KeyView>('PATCH', `/keys/${encodeURIComponent(name)}`, { json: limits })).body;
  }
  async usage(
    filter: { key?: string | undefined; model?: string | undefined; since?: string | undefined } = {},
  ): Promise<UsageRow[]> {
    return (await this.request<ListOf<UsageRow>>('GET', '/usage', { query: filter })).body.items;
  }
  async revokeKey(name: string): Promise<KeyView> {
    return (await this.request<KeyView>('DELETE', `/keys/${encodeURIComponent(name)}`)).body;
  }
  async audit(
    filter: {
      limit?: number;
      before?: number;
      actor?: string;
      target?: string;
      action?: string;
      since?: string;
    } = {},
  ): Promise<AuditView[]> {
    return (await this.request<ListOf<AuditView>>('GET', '/audit', { query: filter })).body.items;
  }
  async listNodes(): Promise<NodeView[]> {
    return (await this.request<ListOf<NodeView>>('GET', '/nodes')).body.items;
  }
  async getNode(name: string): Promise<NodeView> {
    return (await this.request<NodeView>('GET', `/nodes/${encodeURIComponent(name)}`)).body;
  }
  async removeNode(name: string): Promise<{ name: string; id: string }> {
    return (await this.request<{ name: string; id: string }>('DELETE', `/nodes/${encodeURIComponent(name)}`))
      .body;
  }
  async status(): Promise<ClusterStatus> {
    return (await this.request<ClusterStatus>('GET', '/status')).body;
  }
  async createJoinToken(options: {
    name?: string | undefined;
    expiresIn?: number | undefined;
  }): Promise<CreatedJoinToken> {
    const json = {
      ...(options.name === undefined ? {} : { name: options.name }),
      ...(options.expiresIn === undefined ? {} : { expires_in: options.expiresIn }),
    };
    return (await this.request<CreatedJoinToken>('POST', '/node-tokens', { json })).body;
  }
  async listJoinTokens(includeRevoked = false): Promise<JoinTokenView[]> {
    return (
      await this.request<ListOf<JoinTokenView>>('GET', '/node-tokens', {
        query: { revoked: includeRevoked ? 'true' : undefined },
      })
    ).body.items;
  }
  async revokeJoinToken(name: string): Promise<JoinTokenView> {
    return (await this.request<JoinTokenView>('DELETE', `/node-tokens/${encodeURIComponent(name)}`)).body;
  }
  /** Checks a join token without joining (for llmgw doctor). */
  async checkJoinToken(token: string): Promise<{ name: string; expires_at: string | null }> {
    return (
      await new ApiClient({ server: this.server, key: token, fetch: this.#fetch }).request<{
        name: string;
        expires_at: string | null;
      }>('GET', '/agent/token')
    ).body;
  }
  async listReplicas(model?: string): Promise<ReplicaView[]> {
    return (await this.request<ListOf<ReplicaView>>('GET', '/replicas', { query: { model } })).body.items;
  }
  async getReplica(id: string): Promise<ReplicaView> {
    return (await this.request<ReplicaView>('GET', `/replicas/${encodeURIComponent(id)}`)).body;
  }
  async restartReplica(id: string, inPlace: boolean): Promise<RestartResult> {
    return (
      await this.request<RestartResult>('POST', `/replicas/${encodeURIComponent(id)}/restart`, {
        json: { in_place: inPlace },
      })
    ).body;
  }
  async scaleModel(name: string, replicas: number): Promise<ModelView> {
    return (
      await this.request<ModelView>('POST', `/models/${encodeURIComponent(name)}/scale`, {
        json: { replicas },
      })
    ).body;
  }
  /** A replica's log: the last lines, then (follow) each new one as it is written, until `signal` aborts. */
  async logs(
    id: string,
    o: {
      rank?: number;
      tail?: number;
      follow?: boolean;
      signal?: AbortSignal;
      onText: (text: string) => void;
    },
  ): Promise<void> {
    const url = new URL(`${this.server}/api/v1/replicas/${encodeURIComponent(id)}/logs`);
    url.searchParams.set('rank', String(o.rank ?? 0));
    url.searchParams.set('tail', String(o.tail ?? 200));
    url.searchParams.set('follow', o.follow === true ? 'true' : 'false');
    const headers: Record<string, string> =
      this.#key === undefined ? {} : { authorization: `Bearer ${this.#key}` };
    let res: Response;
    try {
      res = await this.#fetch(url, { headers, ...(o.signal === undefined ? {} : { signal: o.signal }) });
    } catch (e) {
      if (o.signal?.aborted === true) return;
      if (e instanceof LlmgwError) throw e;
      throw unreachable(this.server, e);
    }
    if (!res.ok)
      throw toApiError(
        res.status,
        await res.text(),
        (res.headers.get('content-type') ?? '').includes('json'),
      );
    if (res.body === null) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>)
        o.onText(decoder.decode(chunk, { stream: true }));
    } catch (e) {
      if (o.signal?.aborted !== true) throw e;
    }
  }
  async getConfig(): Promise<{ text: string; etag: string; path: string; overriddenByEnv: string[] }> {
    const res = await this.request<string>('GET', '/config', { headers: { accept: 'application/yaml' } });
    return {
      text: res.body,
      etag: res.headers.get('etag') ?? '',
      path: res.headers.get('x-llmgw-config-path') ?? '',
      overriddenByEnv: (res.headers.get('x-llmgw-overridden-by-env') ?? '')
        .split(',')
        .filter((s) => s !== ''),
    };
  }
  async putConfig(text: string, etag?: string): Promise<ConfigChangeView> {
    const headers: Record<string, string> = etag === undefined || etag === '' ? {} : { 'if-match': etag };
    return (
      await this.request<ConfigChangeView>('PUT', '/config', {
        text,
        contentType: 'application/yaml',
        headers,
        // New declared models' sources are resolved before the file is written.
        timeoutMs: resolvingMs,
      })
    ).body;
  }
}

function toApiError(status: number, text: string, isJson: boolean): ApiError {
  if (isJson) {
    try {
      const body = JSON.parse(text) as Partial<ErrorBody>;
      if (body.error !== undefined) {
        const code = (body.error.code in errorStatus ? body.error.code : 'internal') as ErrorCode;
        const issues = (body.error.issues ?? []).map((i) => ({
          path: i.path === '' ? [] : [i.path],
          message: i.message,
          ...(i.line === undefined ? {} : { line: i.line }),
        }));
        return new ApiError(status, code, body.error.message, issues);
      }
    } catch {
      // Not our error shape: fall through to the status alone.
    }
  }
  return new ApiError(
    status,
    status >= 500 ? 'internal' : 'invalid_argument',
    `the server answered ${status}: ${text.slice(0, 200)}`,
    [],
  );
}

/** A request that never left: no connection was made. */
function unreachable(server: string, e: unknown): LlmgwError {
  const { why } = failureOf(e);
  return new LlmgwError(
    'unavailable',
    `cannot reach the control plane at ${server} (${why}): is it running? (llmgw up starts one on this machine; --server or LLMGW_SERVER points elsewhere)`,
    { cause: e },
  );
}
