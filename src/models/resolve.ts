/**
 * A source resolved to the model's origin: the files it is, with sizes and digests, pinned to a commit.
 * Network access goes through an injected fetch; the hub token is sent only to the hub's endpoint.
 */
import { basename } from 'node:path';
import { z } from 'zod';
import { LlmgwError, messageOf } from '../core/errors.js';
import { resolveLocalSource, type OwnPath } from './local-source.js';
import type { Origin } from './origin.js';
import { type TreeFile, selectFiles } from './select.js';
import { formatHf, parseSource } from './source.js';

export type { Origin, OriginFile } from './origin.js';

/** What of a fetch Response is used; node's global fetch fits. */
export interface FetchResponse {
  status: number;
  statusText: string;
  ok: boolean;
  headers: { get(name: string): string | null };
  json(): Promise<unknown>;
  text(): Promise<string>;
}

export type FetchLike = (
  url: string,
  init?: {
    method?: string;
    headers?: Record<string, string>;
    redirect?: 'follow' | 'manual';
    signal?: AbortSignal;
  },
) => Promise<FetchResponse>;

export interface ResolveOptions {
  fetch: FetchLike;
  /** hub.endpoint (the caller honours HF_ENDPOINT), e.g. https://huggingface.co. */
  endpoint: string;
  /** hub.token (or HF_TOKEN): sent only to the endpoint. */
  token?: string;
  signal?: AbortSignal;
  /** The control plane's own files and folders: never a local source. */
  own?: readonly OwnPath[];
}

const revisionInfo = z.object({
  sha: z.string().regex(/^[0-9a-f]{40}$/),
  gated: z.union([z.boolean(), z.string()]).optional(),
});
const treePage = z.array(
  z.object({
    type: z.string(),
    path: z.string(),
    size: z.number().int().nonnegative(),
    oid: z.string(),
    lfs: z.object({ oid: z.string(), size: z.number().int().nonnegative() }).optional(),
  }),
);
const safetensorsIndex = z.object({ weight_map: z.record(z.string(), z.string()) });

/** Talks to the hub: the token only on requests to its origin; failures turned into words. */
class Hub {
  readonly base: string;
  private readonly origin: string;

  private readonly opts: ResolveOptions;
  private readonly label: string;

  constructor(opts: ResolveOptions, label: string) {
    this.opts = opts;
    this.label = label;
    const url = new URL(opts.endpoint);
    url.username = '';
    url.password = '';
    this.base = url.href.replace(/\/+$/, '');
    this.origin = url.origin;
  }

  async get(
    url: string,
    init: { method?: string; redirect?: 'follow' | 'manual' } = {},
  ): Promise<FetchResponse> {
    const headers: Record<string, string> = {};
    const token = this.opts.token;
    if (token && new URL(url).origin === this.origin) headers['authorization'] = `Bearer ${token}`;
    try {
      return await this.opts.fetch(url, {
        ...init,
        headers,
        ...(this.opts.signal ? { signal: this.opts.signal } : {}),
      });
    } catch (e) {
      throw new LlmgwError(
        'unavailable',
        `the hub at ${this.base} could not be reached (${this.redact(causeOf(e))}) while resolving ${this.label}: ` +
          'check hub.endpoint (or HF_ENDPOINT) and the network',
        { cause: e },
      );
    }
  }

  /** The refusal for a hub error, by its X-Error-Code. */
  async fail(res: FetchResponse, what: { repo: string; revision: string }): Promise<never> {
    const code = res.headers.get('x-error-code') ?? '';
    const page = `${this.base}/${what.repo}`;
    if (code === 'GatedRepo' && this.opts.token === undefined) {
      throw new LlmgwError(
        'precondition_failed',
        `${this.label} is a gated repository: set hub.token (or HF_TOKEN) to a token of an account that was granted access at ${page}`,
      );
    }
    if (code === 'GatedRepo') {
      throw new LlmgwError(
        'precondition_failed',
        `${this.label} is a gated repository and the account of hub.token has no access to it: ask for access at ${page}`,
      );
    }
    if (code === 'RepoNotFound' || (res.status === 401 && code === '')) {
      throw new LlmgwError(
        'not_found',
        `the hub at ${this.base} has no repository ${what.repo}: check the name in ${this.label} (a private one needs hub.token)`,
      );
    }
    if (code === 'RevisionNotFound') {
      throw new LlmgwError(
        'not_found',
        `${what.repo} has no revision ${what.revision} (no branch, tag or commit of that name): check ${this.label}`,
      );
    }
    const body = await res.text().catch(() => '');
    throw new LlmgwError(
      'unavailable',
      `the hub at ${this.base} answered ${res.status} ${res.statusText} while resolving ${this.label}` +
        (body === '' ? '' : `: ${this.redact(body.slice(0, 200))}`),
    );
  }

  redact(text: string): string {
    const token = this.opts.token;
    return token ? text.split(token).join('[token]') : text;
  }
}

function causeOf(e: unknown): string {
  const cause = e instanceof Error && e.cause !== undefined ? e.cause : e;
  return messageOf(cause);
}

function nextLink(res: FetchResponse): string | undefined {
  return /<([^>]+)>\s*;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
}

async function listTree(hub: Hub, repo: string, commit: string): Promise<TreeFile[]> {
  // Without expand=true: sizes and LFS oids come anyway, and pages are larger (expand adds last commits).
  let url: string | undefined = `${hub.base}/api/models/${repo}/tree/${commit}?recursive=true`;
  const files: TreeFile[] = [];
  while (url !== undefined) {
    const res = await hub.get(url);
    if (!res.ok) return hub.fail(res, { repo, revision: commit });
    const page = treePage.safeParse(await res.json());
    if (!page.success) {
      throw new LlmgwError(
        'unavailable',
        `the hub at ${hub.base} answered a tree listing of ${repo} llmgw cannot read`,
      );
    }
    for (const e of page.data) {
      if (e.type === 'file')
        files.push({ path: e.path, size: e.size, oid: e.oid, ...(e.lfs ? { lfs: e.lfs } : {}) });
    }
    url = nextLink(res);
  }
  return files;
}

async function resolveHf(
  source: string,
  parsed: { repo: string; file?: string; revision: string },
  opts: ResolveOptions,
): Promise<Origin> {
  const { repo, revision } = parsed;
  const label = formatHf(repo, { revision });
  const hub = new Hub(opts, label);
  const res = await hub.get(`${hub.base}/api/models/${repo}/revision/${encodeURIComponent(revision)}`);
  if (!res.ok) return hub.fail(res, { repo, revision });
  const info = revisionInfo.safeParse(await res.json());
  if (!info.success) {
    throw new LlmgwError(
      'unavailable',
      `the hub at ${hub.base} answered a revision of ${repo} llmgw cannot read`,
    );
  }
  const commit = info.data.sha;
  const tree = await listTree(hub, repo, commit);
  const at = revision === commit ? `commit ${commit}` : `${revision} (commit ${commit})`;
  const input = { label, at, tree, ...(parsed.file === undefined ? {} : { file: parsed.file }) };
  let chosen = selectFiles(input);
  const resolveUrl = (path: string) =>
    `${hub.base}/${repo}/resolve/${commit}/${path.split('/').map(encodeURIComponent).join('/')}`;
  if (info.data.gated !== undefined && info.data.gated !== false && chosen[0]) {
    const head = await hub.get(resolveUrl(chosen[0].path), { method: 'HEAD', redirect: 'manual' });
    if (head.status >= 400) return hub.fail(head, { repo, revision });
  }
  if (chosen.some((f) => f.path === 'model.safetensors.index.json')) {
    const idx = await hub.get(resolveUrl('model.safetensors.index.json'));
    if (!idx.ok) return hub.fail(idx, { repo, revision });
    const parsedIndex = safetensorsIndex.safeParse(await idx.json().catch(() => undefined));
    if (!parsedIndex.success) {
      throw new LlmgwError(
        'unavailable',
        `${label}: its model.safetensors.index.json has no weight_map llmgw can read`,
      );
    }
    chosen = selectFiles({ ...input, indexFiles: Object.values(parsedIndex.data.weight_map) });
  }
  return {
    source,
    kind: 'hf',
    repo,
    revision,
    commit,
    files: chosen.map((f) =>
      f.lfs ? { path: f.path, size: f.size, sha256: f.lfs.oid } : { path: f.path, size: f.size, etag: f.oid },
    ),
  };
}

async function resolveUrl(url: string, opts: ResolveOptions): Promise<Origin> {
  let res: FetchResponse;
  const signal = opts.signal ? { signal: opts.signal } : {};
  try {
    res = await opts.fetch(url, { method: 'HEAD', ...signal });
  } catch (e) {
    throw new LlmgwError(
      'unavailable',
      `${url} could not be reached (${causeOf(e)}): check the URL and the network`,
      {
        cause: e,
      },
    );
  }
  if (res.status === 404 || res.status === 410) {
    throw new LlmgwError(
      'not_found',
      `${url} answered ${res.status} ${res.statusText}: there is no file there`,
    );
  }
  if (!res.ok) {
    throw new LlmgwError('unavailable', `${url} answered ${res.status} ${res.statusText} to a HEAD request`);
  }
  const length = Number(res.headers.get('content-length') ?? 'NaN');
  if (!Number.isSafeInteger(length) || length <= 0) {
    throw new LlmgwError(
      'unavailable',
      `${url} did not say its size (no Content-Length): llmgw needs it to plan`,
    );
  }
  const etag = res.headers.get('etag') ?? undefined;
  const name = decodeURIComponent(basename(new URL(url).pathname)) || 'index';
  return {
    source: url,
    kind: 'url',
    revision: etag ?? '',
    files: [{ path: name, size: length, ...(etag === undefined ? {} : { etag }) }],
  };
}

/** The origin of a source: refused, in words, when it does not resolve. */
export async function resolveOrigin(source: string, opts: ResolveOptions): Promise<Origin> {
  const parsed = parseSource(source);
  switch (parsed.kind) {
    case 'hf':
      return resolveHf(source.trim(), parsed, opts);
    case 'url':
      return resolveUrl(parsed.url, opts);
    case 'path':
      return resolveLocalSource(parsed.path, opts.own);
  }
}
