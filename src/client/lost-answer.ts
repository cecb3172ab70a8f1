import { LlmgwError, messageOf } from '../core/errors.js';

/**
 * Causes (Node's and undici's codes) of a request that never left: no connection was made,
 * so nothing was asked of the control plane. Any other failure may come after the request
 * was sent (a reset, "other side closed", a timeout while it worked), and then a write may
 * have been made though its answer never came.
 */
const neverSent = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_NONAME',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  // TLS refused before anything was sent.
  'EPROTO',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
]);

/** Methods that change something. */
export function isWrite(method: string): boolean {
  return !['GET', 'HEAD', 'OPTIONS'].includes(method.toUpperCase());
}

/** What undici says went wrong: the innermost code, or a timeout, or the message. */
export function failureOf(e: unknown): { code: string | undefined; why: string } {
  if ((e as { name?: string } | null)?.name === 'TimeoutError')
    return { code: 'TimeoutError', why: 'it did not answer in time' };
  const inner = (e as { cause?: { code?: string; message?: string; errors?: { code?: string }[] } } | null)
    ?.cause;
  const code = inner?.code ?? inner?.errors?.[0]?.code;
  // undici's own codes say less than its words ("other side closed"); the system's say more.
  const words = code?.startsWith('UND_ERR') === true ? inner?.message : undefined;
  return { code, why: words ?? code ?? inner?.message ?? messageOf(e) };
}

/** Whether a fetch that failed so never sent its request. */
export function wasNeverSent(e: unknown): boolean {
  const { code } = failureOf(e);
  return code !== undefined && neverSent.has(code);
}

/**
 * The `llmgw ctl` command that shows whether a write to `path` (under /api/v1) was made: the
 * thing it changed where the path names one, and the audit log, which records every change.
 */
export function checkCommand(method: string, path: string): string {
  const parts = (path.split('?')[0] ?? '')
    .split('/')
    .filter((p) => p !== '')
    .map(decoded);
  const [collection, name] = parts;
  const audit = 'llmgw ctl audit --since 10m';
  // POST /models adds one: its name is in the body, not the path.
  const named = name !== undefined && !(method.toUpperCase() === 'POST' && parts.length === 1);
  switch (collection) {
    case 'models':
      return named ? `llmgw ctl model show ${name}, or ${audit}` : `llmgw ctl models, or ${audit}`;
    case 'replicas':
      return named ? `llmgw ctl replica show ${name}, or ${audit}` : `llmgw ctl replicas, or ${audit}`;
    case 'keys':
      return `llmgw ctl keys, or ${audit}`;
    case 'config':
      return `llmgw ctl config show, or ${audit}`;
    case 'node-tokens':
      return `llmgw ctl node tokens, or ${audit}`;
    case 'nodes':
      return `llmgw ctl nodes, or ${audit}`;
    default:
      return audit;
  }
}

function decoded(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

/**
 * A request that was sent (or may have been) and got no whole answer. A write may have been
 * made: said so, with the command that shows it. A read is only to be asked again.
 */
export function answerLost(o: { server: string; method: string; path: string; error: unknown }): LlmgwError {
  const { why } = failureOf(o.error);
  if (!isWrite(o.method))
    return new LlmgwError(
      'unavailable',
      `no whole answer came from the control plane at ${o.server} (${why}): ask again; if it keeps happening, its log says why`,
      { cause: o.error },
    );
  return new LlmgwError(
    'unavailable',
    `the control plane at ${o.server} took this change but its answer did not come (${why}), so it may have been made or not: ${checkCommand(o.method, o.path)} shows whether it was; make it again only if it was not`,
    { cause: o.error },
  );
}

/**
 * An answer whose head came and whose rest did not: done or refused as its status says (a
 * refusal changes nothing), its words lost.
 */
export function answerCut(o: {
  server: string;
  method: string;
  path: string;
  status: number;
  error: unknown;
}): LlmgwError {
  const { why } = failureOf(o.error);
  if (o.status >= 400)
    return new LlmgwError(
      o.status >= 500 ? 'internal' : 'invalid_argument',
      `the control plane at ${o.server} refused this (it answered ${o.status}), but the rest of its answer, which says why, did not come (${why})`,
      { cause: o.error },
    );
  if (!isWrite(o.method)) return answerLost(o);
  return new LlmgwError(
    'unavailable',
    `the control plane at ${o.server} made this change (it answered ${o.status}) but the rest of its answer did not come (${why}): ${checkCommand(o.method, o.path)} shows it`,
    { cause: o.error },
  );
}
