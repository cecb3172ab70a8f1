/**
 * A fake Hugging Face hub for tests, faithful to the real one's HTTP shapes (huggingface_hub's
 * hf_api.py and file_download.py read these): the revision info with its commit `sha`, the tree
 * listing paged by a `Link: <url>; rel="next"` header, `resolve` answering with `X-Repo-Commit`,
 * `X-Linked-Etag`, `X-Linked-Size` and a 302 to a file server that answers range requests, and
 * the hub's errors (`X-Error-Code`, `{"error": "..."}`).
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A file's bytes, or only its size (and sha256) for listings of large files. */
export type FakeFile = Buffer | { size: number; sha256?: string };

export interface FakeRevision {
  /** The commit this branch or tag points at; made up from the repository's name when absent. */
  commit?: string;
  files: Record<string, FakeFile>;
}

export interface FakeRepo {
  /** The files on `main`. */
  files: Record<string, FakeFile>;
  /** The commit `main` points at. */
  commit?: string;
  /** Other branches and tags. */
  revisions?: Record<string, FakeRevision>;
  /** Its files are downloaded only with a token (`Authorization: Bearer hf_...`). */
  gated?: boolean;
  /** For a gated repository: the tokens of accounts granted access (any `hf_` token when absent). */
  granted?: string[];
}

export interface FakeHubOptions {
  repos: Record<string, FakeRepo>;
  /** Entries in one page of a tree listing (the real hub: 1000, 50 with expand). */
  pageSize?: number;
  /**
   * A slow upstream the test paces: a file's body (GET) stops after `afterBytes` until `until`
   * settles, so a test sees what is served while the upstream has not finished.
   */
  hold?: { afterBytes: number; until: Promise<unknown> };
  /**
   * Serve LFS files from a second server (another origin), as the real hub redirects to
   * cas-bridge.xethub.hf.co: what a client sends after the redirect can then be told apart.
   */
  separateFileServer?: boolean;
}

export interface SeenRequest {
  method: string;
  url: string;
  authorization: string | undefined;
  range: string | undefined;
  /** Which server answered: the hub, or the separate file server (`separateFileServer`). */
  server: 'hub' | 'files';
}

export interface FakeHub {
  /** `http://127.0.0.1:PORT`, the value of hub.endpoint / HF_ENDPOINT. */
  url: string;
  /** Every request answered, in order. */
  requests: SeenRequest[];
  close(): Promise<void>;
}

interface Entry {
  path: string;
  size: number;
  /** The git blob id: of the bytes, or of the LFS pointer for an LFS file. */
  oid: string;
  lfs?: { oid: string; size: number; pointerSize: number };
  body: () => Buffer;
  /** Bytes start..end, inclusive. */
  read: (start: number, end: number) => Buffer;
}

interface Snapshot {
  commit: string;
  entries: Entry[];
}

/** Files the real hub's default .gitattributes stores in LFS. */
const lfsPattern = /\.(gguf|safetensors|bin|pt|pth|onnx|msgpack|h5|model|zip|tar|gz)$/;

function gitBlobId(bytes: Buffer): string {
  return createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The bytes of a file given only by size: a fixed pattern, so ranges can be checked. */
export function patternBytes(size: number): Buffer {
  return patternRange(0, size - 1);
}

/** Bytes start..end (inclusive) of such a file, without making the rest (its size may be 70 GB). */
function patternRange(start: number, end: number): Buffer {
  const out = Buffer.alloc(Math.max(0, end - start + 1));
  for (let i = 0; i < out.length; i++) out[i] = (start + i) % 251;
  return out;
}

/** The most bytes one answer holds: a test that fetches a whole file given by size only gets told. */
const maxServed = 256 * 1024 * 1024;

function entryOf(path: string, file: FakeFile): Entry {
  const bytes = Buffer.isBuffer(file) ? file : undefined;
  const size = bytes ? bytes.length : (file as { size: number }).size;
  const body = bytes ? () => bytes : () => patternBytes(size);
  const read = bytes
    ? (start: number, end: number) => bytes.subarray(start, end + 1)
    : (start: number, end: number) => patternRange(start, end);
  const isLfs = !bytes || lfsPattern.test(path);
  if (!isLfs) return { path, size, oid: gitBlobId(bytes), body, read };
  const given = Buffer.isBuffer(file) ? undefined : file.sha256;
  const digest = given ?? sha256(body());
  const pointer = Buffer.from(
    `version https://git-lfs.github.com/spec/v1\noid sha256:${digest}\nsize ${size}\n`,
  );
  return {
    path,
    size,
    oid: gitBlobId(pointer),
    lfs: { oid: digest, size, pointerSize: pointer.length },
    body,
    read,
  };
}

function commitOf(repo: string, rev: string): string {
  return createHash('sha1').update(`${repo}@${rev}`).digest('hex');
}

function snapshots(name: string, repo: FakeRepo): Map<string, Snapshot> {
  const out = new Map<string, Snapshot>();
  const add = (rev: string, commit: string, files: Record<string, FakeFile>) => {
    const snap = { commit, entries: Object.entries(files).map(([p, f]) => entryOf(p, f)) };
    out.set(rev, snap);
    out.set(commit, snap);
  };
  add('main', repo.commit ?? commitOf(name, 'main'), repo.files);
  for (const [rev, r] of Object.entries(repo.revisions ?? {}))
    add(rev, r.commit ?? commitOf(name, rev), r.files);
  return out;
}

function hubError(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'x-error-code': code,
    'x-error-message': message,
  });
  res.end(JSON.stringify({ error: message }));
}

/** Directories implied by the files, as the tree listing shows them. */
function treeItems(entries: Entry[]): Record<string, unknown>[] {
  const dirs = new Set<string>();
  for (const e of entries) {
    const parts = e.path.split('/');
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
  }
  const items: Record<string, unknown>[] = [...dirs].map((d) => ({
    type: 'directory',
    oid: gitBlobId(Buffer.from(d)),
    size: 0,
    path: d,
  }));
  for (const e of entries) {
    items.push({ type: 'file', oid: e.oid, size: e.size, path: e.path, ...(e.lfs ? { lfs: e.lfs } : {}) });
  }
  return items.sort((a, b) => String(a['path']).localeCompare(String(b['path'])));
}

/** Answers `bytes=a-b`, `bytes=a-` and `bytes=-n`; undefined when the header is absent or not one range. */
function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | 'bad' | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'bad';
  let start: number;
  let end: number;
  if (m[1] === '') {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return 'bad';
  return { start, end };
}

function tooLarge(res: http.ServerResponse, bytes: number): boolean {
  if (bytes <= maxServed) return false;
  res.writeHead(500, { 'content-type': 'text/plain' });
  res.end(`the fake hub serves at most ${maxServed} bytes at once: give this test's repository a small file`);
  return true;
}

function serveBytes(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  file: { read: Entry['read']; size: number; headers?: http.OutgoingHttpHeaders },
  hold?: FakeHubOptions['hold'],
): void {
  const send = (bytes: Buffer) => {
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (hold === undefined || bytes.length <= hold.afterBytes) {
      res.end(bytes);
      return;
    }
    res.write(bytes.subarray(0, hold.afterBytes));
    const rest = () => res.end(bytes.subarray(hold.afterBytes));
    hold.until.then(rest, rest);
  };
  const { read, size } = file;
  const headers: http.OutgoingHttpHeaders = {
    'accept-ranges': 'bytes',
    'content-type': 'application/octet-stream',
    ...file.headers,
  };
  const range = parseRange(req.headers.range, size);
  if (range === 'bad') {
    res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` });
    res.end();
    return;
  }
  if (range) {
    if (req.method !== 'HEAD' && tooLarge(res, range.end - range.start + 1)) return;
    res.writeHead(206, {
      ...headers,
      'content-range': `bytes ${range.start}-${range.end}/${size}`,
      'content-length': range.end - range.start + 1,
    });
    send(read(range.start, range.end));
    return;
  }
  if (req.method !== 'HEAD' && tooLarge(res, size)) return;
  res.writeHead(200, { ...headers, 'content-length': size });
  send(size === 0 ? Buffer.alloc(0) : read(0, size - 1));
}

export async function startFakeHub(options: FakeHubOptions): Promise<FakeHub> {
  const pageSize = options.pageSize ?? 1000;
  const repos = new Map(
    Object.entries(options.repos).map(([n, r]) => [n, { repo: r, snaps: snapshots(n, r) }]),
  );
  const lfsBlobs = new Map<string, Entry>();
  for (const { snaps } of repos.values()) {
    for (const s of snaps.values()) for (const e of s.entries) if (e.lfs) lfsBlobs.set(e.lfs.oid, e);
  }
  const requests: SeenRequest[] = [];
  let base = '';
  let filesBase = '';

  const handler = (which: 'hub' | 'files') => (req: http.IncomingMessage, res: http.ServerResponse) => {
    requests.push({
      method: req.method ?? '',
      url: req.url ?? '',
      authorization: req.headers.authorization,
      range: req.headers.range,
      server: which,
    });
    if (which === 'files' && !(req.url ?? '').startsWith('/lfs-files/')) {
      hubError(res, 404, 'EntryNotFound', 'Entry not found');
      return;
    }
    const url = new URL(req.url ?? '/', base);
    const path = url.pathname.split('/').map(decodeURIComponent);
    const hasToken = /^Bearer hf_\S+$/.test(req.headers.authorization ?? '');

    // The file server LFS downloads are redirected to (the real one: cas-bridge / cdn-lfs).
    if (path[1] === 'lfs-files' && path[2] !== undefined) {
      const entry = lfsBlobs.get(path[2]);
      if (!entry) {
        hubError(res, 404, 'EntryNotFound', 'Entry not found');
        return;
      }
      serveBytes(req, res, entry, options.hold);
      return;
    }

    const api = path[1] === 'api' && path[2] === 'models';
    const [org, name, verb, ...rest] = api ? path.slice(3) : path.slice(1);
    const found = repos.get(`${org ?? ''}/${name ?? ''}`);
    if (!found) {
      hubError(res, 404, 'RepoNotFound', 'Repository not found');
      return;
    }
    const repoId = `${org ?? ''}/${name ?? ''}`;

    if (api && verb === 'revision' && req.method === 'GET') {
      const rev = rest.join('/');
      const snap = found.snaps.get(rev);
      if (!snap) {
        hubError(res, 404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(
        JSON.stringify({
          _id: commitOf(repoId, 'id'),
          id: repoId,
          modelId: repoId,
          sha: snap.commit,
          private: false,
          gated: found.repo.gated ? 'manual' : false,
          disabled: false,
          siblings: snap.entries.map((e) => ({ rfilename: e.path })),
        }),
      );
      return;
    }

    if (api && verb === 'tree' && req.method === 'GET') {
      const [rev = '', ...under] = rest;
      const snap = found.snaps.get(rev);
      if (!snap) {
        hubError(res, 404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
        return;
      }
      const prefix = under.filter((p) => p !== '').join('/');
      const recursive = url.searchParams.get('recursive') === 'true';
      const expand = url.searchParams.get('expand') === 'true';
      let items = treeItems(snap.entries).filter((i) => {
        const p = String(i['path']);
        if (prefix !== '' && !p.startsWith(`${prefix}/`)) return false;
        const restPath = prefix === '' ? p : p.slice(prefix.length + 1);
        return recursive || !restPath.includes('/');
      });
      if (expand)
        items = items.map((i) => (i['type'] === 'file' ? { ...i, lastCommit: { id: snap.commit } } : i));
      const cursor = Number(url.searchParams.get('cursor') ?? '0');
      const page = items.slice(cursor, cursor + pageSize);
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json; charset=utf-8' };
      if (cursor + pageSize < items.length) {
        const next = new URL(url.href);
        next.searchParams.set('cursor', String(cursor + pageSize));
        headers['link'] = `<${next.href}>; rel="next"`;
      }
      res.writeHead(200, headers);
      res.end(JSON.stringify(page));
      return;
    }

    if (!api && verb === 'resolve' && (req.method === 'GET' || req.method === 'HEAD')) {
      const [rev = '', ...filePath] = rest;
      const snap = found.snaps.get(rev);
      if (!snap) {
        hubError(res, 404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
        return;
      }
      if (found.repo.gated && !hasToken) {
        hubError(
          res,
          401,
          'GatedRepo',
          `Access to model ${repoId} is restricted. You must have access to it and be authenticated to access it. Please log in.`,
        );
        return;
      }
      const given = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      if (found.repo.gated && found.repo.granted && !found.repo.granted.includes(given)) {
        hubError(
          res,
          403,
          'GatedRepo',
          `Access to model ${repoId} is restricted and you are not in the authorized list. Visit https://huggingface.co/${repoId} to ask for access.`,
        );
        return;
      }
      const entry = snap.entries.find((e) => e.path === filePath.join('/'));
      if (!entry) {
        hubError(res, 404, 'EntryNotFound', 'Entry not found');
        return;
      }
      const common = { 'x-repo-commit': snap.commit, etag: `"${entry.oid}"`, 'accept-ranges': 'bytes' };
      if (entry.lfs) {
        res.writeHead(302, {
          ...common,
          'x-linked-etag': `"${entry.lfs.oid}"`,
          'x-linked-size': entry.size,
          location: `${filesBase}/lfs-files/${entry.lfs.oid}`,
          'content-length': 0,
        });
        res.end();
        return;
      }
      serveBytes(req, res, { ...entry, headers: common }, options.hold);
      return;
    }

    hubError(res, 404, 'EntryNotFound', 'Entry not found');
  };

  const listen = async (server: http.Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  const server = http.createServer(handler('hub'));
  base = await listen(server);
  const files = options.separateFileServer ? http.createServer(handler('files')) : undefined;
  filesBase = files ? await listen(files) : base;
  const close = (s: http.Server) =>
    new Promise<void>((resolve, reject) => {
      s.closeAllConnections();
      s.close((e) => (e ? reject(e) : resolve()));
    });
  return {
    url: base,
    requests,
    close: async () => {
      await close(server);
      if (files) await close(files);
    },
  };
}
