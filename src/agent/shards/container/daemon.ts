import http from 'node:http';

import {
  chooseApiVersion,
  dockerApiRange,
  isVersionRefused,
  podmanApiVersion,
  type DaemonApi,
} from './api-version.js';
import type { DaemonKind } from './types.js';

/**
 * A small client of a container daemon's HTTP API (Docker Engine's, or Podman's own
 * libpod), over its unix socket or TCP. No library: dockerode speaks only Docker's API
 * (Podman's Docker-compatible one ignores GPU requests before 5.4) and brings ssh2 and
 * protobuf with it; what the agent needs is a dozen calls.
 */

/** Where a daemon listens: a unix socket, or a TCP host and port (plain HTTP). */
export type DaemonEndpoint = { socketPath: string } | { host: string; port: number };

/**
 * `unix:///var/run/docker.sock`, `tcp://10.0.0.5:2375`, or a bare socket path, as
 * `DOCKER_HOST` and `agent.containers.host` say it. TLS (`DOCKER_TLS_VERIFY`) and ssh://
 * are refused: the agent runs beside the daemon, on its socket.
 */
export function parseDaemonHost(host: string): DaemonEndpoint {
  const text = host.trim();
  if (text.startsWith('/')) return { socketPath: text };
  if (text.startsWith('unix://')) {
    const path = text.slice('unix://'.length);
    if (!path.startsWith('/'))
      throw new Error(`${host}: a unix socket address needs an absolute path (unix:///run/…)`);
    return { socketPath: path };
  }
  if (text.startsWith('tcp://') || text.startsWith('http://')) {
    const url = new URL(text.replace(/^tcp:/, 'http:'));
    const port = url.port === '' ? 2375 : Number(url.port);
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
  }
  throw new Error(
    `${host}: not a daemon address the agent can use; give unix:///path/to/docker.sock or tcp://host:port`,
  );
}

export function describeEndpoint(endpoint: DaemonEndpoint): string {
  return 'socketPath' in endpoint
    ? `unix://${endpoint.socketPath}`
    : `tcp://${endpoint.host}:${endpoint.port}`;
}

/** The daemon answered with an error status: its message, as it wrote it. */
export class DaemonError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.name = 'DaemonError';
    this.status = status;
  }
}

export interface DaemonRequest {
  method: 'GET' | 'POST' | 'DELETE' | 'HEAD';
  /** After the version prefix: `/containers/create`. */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** Whole-request timeout (default 30 s); streams pass 0 (none) and an AbortSignal. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export class DaemonClient {
  readonly endpoint: DaemonEndpoint;
  readonly kind: DaemonKind;
  #version: string;
  #apiVersion: string;
  #renegotiating: Promise<void> | undefined;

  constructor(endpoint: DaemonEndpoint, kind: DaemonKind, version = '', apiVersion?: string) {
    this.endpoint = endpoint;
    this.kind = kind;
    this.#version = version;
    this.#apiVersion = apiVersion ?? (kind === 'podman' ? podmanApiVersion : dockerApiRange.min);
  }

  /** Daemon's version, from GET /version (as of the last negotiation). */
  get version(): string {
    return this.#version;
  }

  /** The API version in this client's paths, negotiated with the daemon (`1.52`, `4.0.0`). */
  get apiVersion(): string {
    return this.#apiVersion;
  }

  /**
   * Asks the daemon what it is and which API versions it speaks (unversioned `GET
   * /version`, and Podman's `GET /libpod/_ping`), tells Docker from Podman (Podman lists a
   * "Podman Engine" component) and keeps the highest API version both sides speak.
   * `kind`: what the settings say; `auto` takes what the daemon says. Refused
   * (ApiVersionRefusal) when the daemon and llmgw share no API version.
   */
  static async connect(host: string, kind: DaemonKind | 'auto' = 'auto'): Promise<DaemonClient> {
    const endpoint = parseDaemonHost(host);
    const api = await askDaemonApi(endpoint);
    if (kind !== 'auto' && kind !== api.kind)
      throw new Error(
        `${describeEndpoint(endpoint)} is ${api.kind === 'podman' ? 'Podman' : 'Docker'} ${api.version}, but agent.containers.runtime says ${kind}`,
      );
    return new DaemonClient(endpoint, api.kind, api.version, chooseApiVersion(api));
  }

  /** Asks the daemon's versions again (it was upgraded or downgraded since) and chooses anew. */
  renegotiate(): Promise<void> {
    this.#renegotiating ??= (async () => {
      try {
        const api = await askDaemonApi(this.endpoint);
        if (api.kind !== this.kind)
          throw new Error(
            `${describeEndpoint(this.endpoint)} is now ${api.kind === 'podman' ? 'Podman' : 'Docker'} ${api.version}; restart the agent to use it`,
          );
        this.#apiVersion = chooseApiVersion(api);
        this.#version = api.version;
      } finally {
        this.#renegotiating = undefined;
      }
    })();
    return this.#renegotiating;
  }

  /** The versioned path: `/v1.52/containers/create`, `/v4.0.0/libpod/containers/create`. */
  url(path: string, query?: DaemonRequest['query']): string {
    const prefix = this.kind === 'podman' ? `/v${this.#apiVersion}/libpod` : `/v${this.#apiVersion}`;
    return `${prefix}${path}${queryString(query)}`;
  }

  /** A request whose answer is read whole; an error status throws DaemonError with the daemon's message. */
  async call(req: DaemonRequest): Promise<{ status: number; body: Buffer }> {
    const res = await this.open(req);
    const body = await readAll(res);
    return { status: res.statusCode ?? 0, body };
  }

  async json<T>(req: DaemonRequest): Promise<T> {
    const { body } = await this.call(req);
    return (body.length === 0 ? undefined : JSON.parse(body.toString())) as T;
  }

  /**
   * A request whose answer streams (logs, pulls, waits); an error status throws as for
   * call(). A daemon that refuses the negotiated version (upgraded under the agent) is
   * asked its versions again, once, and the request made again at the new one.
   */
  async open(req: DaemonRequest): Promise<http.IncomingMessage> {
    const spoken = this.#apiVersion;
    try {
      return await this.#open(req);
    } catch (e) {
      if (!(e instanceof DaemonError) || !isVersionRefused(e.status, e.message)) throw e;
      if (this.#apiVersion === spoken) await this.renegotiate();
      if (this.#apiVersion === spoken) throw e;
      return this.#open(req);
    }
  }

  async #open(req: DaemonRequest): Promise<http.IncomingMessage> {
    const res = await send(this.endpoint, { ...req, path: this.url(req.path, req.query), query: undefined });
    const status = res.statusCode ?? 0;
    if (status >= 400) {
      const body = await readAll(res);
      throw new DaemonError(status, errorMessage(body) ?? `${req.method} ${req.path} answered ${status}`);
    }
    return res;
  }
}

/** What the daemon at `endpoint` is and which API versions it speaks, from its unversioned answers. */
async function askDaemonApi(endpoint: DaemonEndpoint): Promise<DaemonApi> {
  const res = await send(endpoint, { method: 'GET', path: '/version', timeoutMs: 5000 });
  const body = await readAll(res);
  if ((res.statusCode ?? 0) !== 200)
    throw new DaemonError(res.statusCode ?? 0, `GET /version answered ${res.statusCode}: ${body.toString()}`);
  const parsed = JSON.parse(body.toString()) as unknown;
  const { kind } = detectDaemon(parsed);
  // Podman's /version gives its Docker-compatible API; its ping names the libpod one the agent speaks.
  const ping =
    kind === 'podman'
      ? await send(endpoint, { method: 'GET', path: '/libpod/_ping', timeoutMs: 5000 })
      : undefined;
  if (ping !== undefined) await readAll(ping);
  const libpod = ping?.statusCode === 200 ? headerText(ping.headers['libpod-api-version']) : undefined;
  return daemonApi(parsed, libpod);
}

/** The daemon's kind, version and API versions, from its `/version` (and Podman's ping header). */
export function daemonApi(versionBody: unknown, libpodApiVersion?: string): DaemonApi {
  const { kind, version } = detectDaemon(versionBody);
  const v = (typeof versionBody === 'object' && versionBody !== null ? versionBody : {}) as {
    ApiVersion?: unknown;
    MinAPIVersion?: unknown;
  };
  const text = (x: unknown): string | undefined => (typeof x === 'string' && x !== '' ? x : undefined);
  if (kind === 'podman') return { kind, version, apiVersion: libpodApiVersion, minApiVersion: undefined };
  return { kind, version, apiVersion: text(v.ApiVersion), minApiVersion: text(v.MinAPIVersion) };
}

function headerText(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Docker or Podman, and its version, from a GET /version answer. */
export function detectDaemon(body: unknown): { kind: DaemonKind; version: string } {
  const v = (typeof body === 'object' && body !== null ? body : {}) as {
    Version?: unknown;
    Components?: unknown;
  };
  const components = Array.isArray(v.Components)
    ? (v.Components as { Name?: unknown; Version?: unknown }[])
    : [];
  const podman = components.find((c) => typeof c.Name === 'string' && /podman/i.test(c.Name));
  if (podman !== undefined)
    return {
      kind: 'podman',
      version:
        typeof podman.Version === 'string' ? podman.Version : typeof v.Version === 'string' ? v.Version : '',
    };
  return { kind: 'docker', version: typeof v.Version === 'string' ? v.Version : '' };
}

function queryString(query: DaemonRequest['query']): string {
  if (query === undefined) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/** The daemon's `{"message": …}` (Docker, and Podman's `cause`/`message`), else the body's text. */
function errorMessage(body: Buffer): string | undefined {
  const text = body.toString().trim();
  if (text === '') return undefined;
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // Not JSON: the text is the message.
  }
  return text.slice(0, 500);
}

function send(endpoint: DaemonEndpoint, req: DaemonRequest): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
    const headers: Record<string, string | number> = { host: 'docker' };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = payload.length;
    }
    const timeoutMs = req.timeoutMs ?? 30_000;
    const r = http.request(
      {
        ...endpoint,
        method: req.method,
        path: `${req.path}${queryString(req.query)}`,
        headers,
        // No keep-alive pool: streams (logs, waits) hold their sockets for hours.
        agent: false,
        ...(req.signal === undefined ? {} : { signal: req.signal }),
      },
      (res) => {
        if (timeoutMs > 0) res.once('end', () => clearTimeout(timer));
        resolve(res);
      },
    );
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            r.destroy(
              new Error(
                `${describeEndpoint(endpoint)} did not answer ${req.method} ${req.path} within ${timeoutMs / 1000} s`,
              ),
            );
          }, timeoutMs)
        : undefined;
    timer?.unref();
    r.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED')
        reject(new Error(`no container daemon answers at ${describeEndpoint(endpoint)} (${e.code})`));
      else reject(e);
    });
    r.end(payload);
  });
}

export function readAll(res: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => {
      resolve(Buffer.concat(chunks));
    });
    res.on('error', reject);
  });
}

/** Calls `onLine` with each JSON line of a streamed answer (pull progress); resolves at its end. */
export function readJsonLines(res: http.IncomingMessage, onLine: (value: unknown) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let partial = '';
    res.setEncoding('utf8');
    const take = (line: string): void => {
      const text = line.trim();
      if (text === '') return;
      try {
        onLine(JSON.parse(text));
      } catch {
        // A line that is not JSON carries nothing to report.
      }
    };
    res.on('data', (d: string) => {
      const lines = (partial + d).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) take(line);
    });
    res.on('end', () => {
      take(partial);
      resolve();
    });
    res.on('error', reject);
    res.on('aborted', () => {
      reject(new Error('the daemon closed the stream'));
    });
  });
}
