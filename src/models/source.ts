/**
 * Where a model's weights come from, as written in the catalog: `hf://ORG/REPO[/FILE][@REVISION]`,
 * an http(s) URL, or an absolute local path. Parsing is pure; resolving it is in resolve.ts.
 */
import { isAbsolute, normalize } from 'node:path';
import { LlmgwError } from '../core/errors.js';

export type Source =
  | { kind: 'hf'; repo: string; file?: string; revision: string }
  | { kind: 'url'; url: string }
  | { kind: 'path'; path: string };

const forms = 'write hf://ORG/REPO[/FILE][@REVISION], an http(s) URL, or an absolute path';
const namePart = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function refuse(source: string, why: string): never {
  throw new LlmgwError('invalid_argument', `model source "${source}" ${why}`);
}

function parseHf(source: string): Source {
  const body = source.slice('hf://'.length);
  const at = body.indexOf('@');
  const path = at === -1 ? body : body.slice(0, at);
  const revision = at === -1 ? 'main' : body.slice(at + 1);
  if (at !== -1 && revision === '')
    refuse(source, 'has an empty revision after @: name a branch, tag or commit');
  if (/\s/.test(revision)) refuse(source, 'has spaces in its revision');
  const parts = path.split('/');
  const [org, name, ...rest] = parts;
  if (org === undefined || name === undefined || !namePart.test(org) || !namePart.test(name)) {
    refuse(
      source,
      `does not name a repository: write hf://ORG/REPO, for example hf://Qwen/Qwen2.5-7B-Instruct`,
    );
  }
  if (rest.some((p) => p === '' || p === '.' || p === '..')) {
    refuse(source, 'has an empty, "." or ".." part in its file path');
  }
  const repo = `${org}/${name}`;
  return rest.length > 0
    ? { kind: 'hf', repo, file: rest.join('/'), revision }
    : { kind: 'hf', repo, revision };
}

function parseUrl(source: string): Source {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    return refuse(source, `is not a valid URL: ${forms}`);
  }
  if (url.hostname === '') refuse(source, 'names no host');
  if (url.username !== '' || url.password !== '') {
    refuse(source, 'carries a user name or password: put no secret in a model source');
  }
  return { kind: 'url', url: url.href };
}

/** Reads a source string; refuses, in words, anything it cannot be. */
export function parseSource(source: string): Source {
  const s = source.trim();
  if (s === '') throw new LlmgwError('invalid_argument', `a model source is empty: ${forms}`);
  if (s.startsWith('hf://')) return parseHf(s);
  if (/^https?:\/\//i.test(s)) return parseUrl(s);
  if (isAbsolute(s)) {
    if (s.split('/').includes('..')) refuse(s, 'has ".." in it: write the path without it');
    return { kind: 'path', path: normalize(s) };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(s)) refuse(s, `has a scheme llmgw does not read: ${forms}`);
  if (/^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*(\/.*)?$/.test(s)) {
    refuse(s, `is not one llmgw reads: for a Hugging Face repository write hf://${s}`);
  }
  return refuse(s, `is not one llmgw reads: ${forms}`);
}

/** The source written back, e.g. in messages: `hf://ORG/REPO/FILE@REV` (revision `main` left out). */
export function formatHf(repo: string, opts: { file?: string; revision?: string } = {}): string {
  const file = opts.file === undefined ? '' : `/${opts.file}`;
  const rev = opts.revision === undefined || opts.revision === 'main' ? '' : `@${opts.revision}`;
  return `hf://${repo}${file}${rev}`;
}

/** A size the way a person reads it: 4.7 GB, 512 MB, 12 kB (decimal units, as the hub shows them). */
export function formatSize(bytes: number): string {
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(1)} GB`;
  if (bytes >= 1e6) return `${Math.round(bytes / 1e6)} MB`;
  if (bytes >= 1e3) return `${Math.round(bytes / 1e3)} kB`;
  return `${bytes} B`;
}
