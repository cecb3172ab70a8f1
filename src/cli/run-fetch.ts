/**
 * `llmgw fetch`: resolves a source (or takes the origin the control plane pinned), then fetches
 * its files with the agent's ModelFetcher into DIR in the Hugging Face cache layout, so the
 * engine's arguments (src/kube/manifests.ts podWeights) find them at DIR/models--ORG--REPO/
 * snapshots/<commit>/. Files already there are not fetched again (a restarted pod).
 */
import { lstat } from 'node:fs/promises';

import { z } from 'zod';

import { LlmgwError } from '../core/errors.js';
import { filePaths, hubFileUrl, originLayout } from '../models/cache-layout.js';
import { hubAccess } from '../models/hub.js';
import { ModelFetcher } from '../models/model-fetcher.js';
import { originSchema, type Origin } from '../models/origin.js';
import { resolveOrigin } from '../models/resolve.js';
import { formatHf, parseSource } from '../models/source.js';
import { bytesText, progressText } from '../protocol/cache-views.js';

import type { Output } from './output.js';
import { UsageError } from './usage-error.js';

export interface FetchCommand {
  o: Output;
  source: string;
  into: string;
  revision?: string | undefined;
  /** The pinned origin as JSON (what the control plane resolved). */
  origin?: string | undefined;
  endpoint?: string | undefined;
  env?: Record<string, string | undefined>;
  /** How often a progress line is written after the first, at 1 s (default 5 s). */
  progressMs?: number;
}

export interface FetchSummary {
  source: string;
  commit?: string;
  snapshot: string;
  files: number;
  bytes: number;
  /** Bytes fetched by this run (0: everything was already there). */
  fetched_bytes: number;
}

export async function runFetch(c: FetchCommand): Promise<FetchSummary> {
  const env = c.env ?? process.env;
  const access = hubAccess({ endpoint: c.endpoint }, env);
  const origin = c.origin === undefined ? await resolve(c, access) : pinned(c);
  if (origin.kind === 'path') {
    throw new UsageError(
      `${origin.source} is a local path: engines read it where it is, there is nothing to fetch`,
    );
  }
  const layout = originLayout(c.into, origin);
  if (layout === undefined) throw new Error('unreachable: only a path origin has no layout');
  const total = origin.files.reduce((s, f) => s + f.size, 0);
  const missing = await missingBytes(origin, layout);
  const at = origin.commit === undefined ? '' : ` at ${origin.commit}`;
  const count = `${origin.files.length} file${origin.files.length === 1 ? '' : 's'}`;
  if (missing === 0) {
    c.o.err(
      `${origin.source}${at}: nothing to fetch, ${count} (${bytesText(total)}) already in ${layout.snapshotDir}`,
    );
  } else {
    c.o.err(
      `fetching ${origin.source}${at}: ${bytesText(missing)} of ${bytesText(total)} into ${layout.snapshotDir}`,
    );
  }
  const fetcher = new ModelFetcher({ root: c.into });
  const job = fetcher.ensure(origin, (file) => {
    const url = hubFileUrl(access.endpoint, origin, file);
    // The token goes to the hub only, never to a plain URL.
    return origin.kind === 'hf' && access.token !== undefined
      ? { url, headers: { authorization: `Bearer ${access.token}` } }
      : { url };
  });
  const tell = () => {
    if (job.state === 'downloading' || job.state === 'verifying')
      c.o.err(`${job.state} ${origin.source}: ${progressText(job.progress())}`);
  };
  // A first line soon, so a log shows the bytes moving; then one every few seconds.
  let ticker: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    tell();
    ticker = setInterval(tell, c.progressMs ?? 5000);
  }, 1000);
  const stop = () => job.cancel();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  try {
    const result = await job.done;
    const summary: FetchSummary = {
      source: origin.source,
      ...(origin.commit === undefined ? {} : { commit: origin.commit }),
      snapshot: result.snapshotDir,
      files: origin.files.length,
      bytes: total,
      fetched_bytes: missing,
    };
    if (missing > 0)
      c.o.err(`fetched ${origin.source}: ${bytesText(missing)}; ${count} in ${result.snapshotDir}`);
    if (c.o.json) c.o.out(JSON.stringify(summary));
    return summary;
  } finally {
    clearTimeout(first);
    clearInterval(ticker);
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
  }
}

/** The source resolved against the hub, at --revision when given. */
async function resolve(c: FetchCommand, access: ReturnType<typeof hubAccess>): Promise<Origin> {
  const parsed = parseSource(c.source);
  let source = c.source.trim();
  if (c.revision !== undefined) {
    if (parsed.kind !== 'hf') {
      throw new UsageError(`--revision names a revision of a hub repository, and ${source} is not one`);
    }
    source = formatHf(parsed.repo, {
      ...(parsed.file === undefined ? {} : { file: parsed.file }),
      revision: c.revision,
    });
  }
  return resolveOrigin(source, { fetch, ...access });
}

/** The origin given by --origin, checked: its source must be the one named. */
function pinned(c: FetchCommand): Origin {
  let raw: unknown;
  try {
    raw = JSON.parse(c.origin ?? '');
  } catch {
    throw new UsageError('--origin is not JSON: give the origin as the control plane stored it');
  }
  const parsed = originSchema.safeParse(raw);
  if (!parsed.success) {
    throw new UsageError(`--origin is not an origin: ${z.prettifyError(parsed.error).replace(/\n/g, '; ')}`);
  }
  const origin = parsed.data;
  if (origin.source !== c.source.trim()) {
    throw new UsageError(
      `--origin is the origin of ${origin.source}, not of ${c.source}: give the same source`,
    );
  }
  if (c.revision !== undefined && c.revision !== origin.commit && c.revision !== origin.revision) {
    throw new LlmgwError(
      'invalid_argument',
      `--revision ${c.revision} is not the origin's (${origin.commit ?? origin.revision}): give one of them, or neither`,
    );
  }
  return origin;
}

/** Bytes of the origin not yet in the cache (a blob at its full size, or a file placed in the snapshot). */
async function missingBytes(
  origin: Origin,
  layout: NonNullable<ReturnType<typeof originLayout>>,
): Promise<number> {
  let missing = 0;
  for (const f of origin.files) {
    const p = filePaths(layout, origin, f);
    const blob = await lstat(p.blob).catch(() => undefined);
    if (blob?.isFile() === true && blob.size === f.size) continue;
    const placed = await lstat(p.snapshot).catch(() => undefined);
    if (placed?.isFile() === true && placed.size === f.size) continue;
    missing += f.size;
  }
  return missing;
}
