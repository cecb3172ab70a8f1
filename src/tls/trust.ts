import { X509Certificate } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { isIP } from 'node:net';
import { dirname } from 'node:path';
import { Readable } from 'node:stream';
import { connect, type DetailedPeerCertificate } from 'node:tls';

import { LlmgwError, messageOf } from '../core/errors.js';

import { fingerprint, publicKeyHash } from './certificates.js';
import { readIfThere } from './cluster-ca.js';

/** A join token with the CA's key hash after a dot, one paste: `llmgw_join_<secret>.<sha256 hex>`. */
export function joinTokenWithHash(secret: string, caHash: string | undefined): string {
  return caHash === undefined ? secret : `${secret}.${caHash.replace(/^sha256:/, '')}`;
}

/** The secret the control plane checks, and the CA hash (`sha256:<hex>`) when the token carries one. */
export function splitJoinToken(token: string): { secret: string; caHash?: string } {
  const m = /^(.+)\.([0-9a-f]{64})$/.exec(token.trim());
  return m === null ? { secret: token.trim() } : { secret: m[1] ?? '', caHash: `sha256:${m[2] ?? ''}` };
}

/** Certificate errors of a TLS handshake: the peer was reached, and not trusted. */
const untrusted = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

export function isUntrusted(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  const cause = (e as { cause?: { code?: unknown } } | null)?.cause?.code;
  return untrusted.has(String(code)) || untrusted.has(String(cause));
}

/**
 * The certificates an https address presents, leaf first, as sent (unchecked unless `ca`
 * or `system` trust is asked for: then a certificate it does not trust is refused).
 */
export function presentedChain(
  server: string,
  o: { trust?: { ca?: string } } = {},
): Promise<X509Certificate[]> {
  const url = new URL(server);
  const port = Number(url.port === '' ? 443 : url.port);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const socket = connect({
      host,
      port,
      ...(isIP(host) === 0 ? { servername: host } : {}),
      rejectUnauthorized: o.trust !== undefined,
      ...(o.trust?.ca === undefined ? {} : { ca: o.trust.ca }),
      ALPNProtocols: ['http/1.1'],
    });
    socket.setTimeout(10_000, () => socket.destroy(new Error('no TLS handshake within 10 s')));
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      const chain: X509Certificate[] = [];
      let c = peerOrNone(socket.getPeerCertificate(true));
      while (c !== undefined && chain.length < 10) {
        const cert = new X509Certificate(c.raw);
        if (chain.some((k) => k.fingerprint256 === cert.fingerprint256)) break;
        chain.push(cert);
        c = peerOrNone(c.issuerCertificate);
      }
      socket.destroy();
      resolve(chain);
    });
  });
}

/** A chain ends where Node gives an empty object or none (its types say it always gives one). */
function peerOrNone(c: DetailedPeerCertificate | undefined): DetailedPeerCertificate | undefined {
  return (c as Partial<DetailedPeerCertificate> | undefined)?.raw === undefined ? undefined : c;
}

/**
 * What a joining agent trusts at an https control plane: the CA it pinned at its first
 * join (DATA_DIR/agent/server-ca.pem); at a first join, the CA in the chain the server
 * presents whose key hash is the token's, then pinned. Undefined: the system's CAs.
 */
export async function agentTrust(o: {
  server: string;
  pinFile: string;
  caHash: string | undefined;
}): Promise<string | undefined> {
  const url = new URL(o.server);
  if (url.protocol !== 'https:') {
    if (o.caHash !== undefined)
      throw new LlmgwError(
        'invalid_argument',
        `the join token carries the cluster CA's hash, but --server ${o.server} is plain http: use https://${url.host}`,
      );
    return undefined;
  }
  const pinned = readIfThere(o.pinFile);
  if (pinned !== undefined && (o.caHash === undefined || publicKeyHash(pinned) === o.caHash)) return pinned;
  if (o.caHash === undefined) return undefined;
  let chain: X509Certificate[];
  try {
    chain = await presentedChain(o.server);
  } catch (e) {
    throw new LlmgwError(
      'unavailable',
      `cannot reach ${o.server} to check its certificate: ${messageOf(e)}`,
      {
        cause: e,
      },
    );
  }
  const at = chain.findIndex((c) => c.ca && publicKeyHash(c.toString()) === o.caHash);
  if (at < 0) {
    const seen = chain.map((c) => publicKeyHash(c.toString())).at(-1) ?? 'none';
    throw new LlmgwError(
      'unauthenticated',
      `refused: the control plane at ${o.server} presents a certificate whose CA has key hash ${seen}, but the join token expects ${o.caHash}. Check that --server is your cluster's address; if it is, make a new token there with llmgw ctl node token (it carries the current CA's hash)`,
    );
  }
  // Each certificate up to that CA signed by the next: the server holds a key the CA vouches for.
  for (let i = 0; i < at; i++) {
    const [cert, issuer] = [chain[i], chain[i + 1]];
    if (cert === undefined || issuer === undefined || !cert.verify(issuer.publicKey))
      throw new LlmgwError(
        'unauthenticated',
        `refused: the certificate ${o.server} presents is not signed by the CA of hash ${o.caHash} it sent along`,
      );
  }
  const ca = chain[at]?.toString() ?? '';
  mkdirSync(dirname(o.pinFile), { recursive: true, mode: 0o700 });
  writeFileSync(o.pinFile, ca, { mode: 0o644 });
  return ca;
}

/**
 * A fetch that trusts `ca` (PEM) for https addresses, the others through the global fetch.
 * A certificate that does not chain to it is refused naming both certificates' fingerprints.
 */
export function fetchTrusting(ca: string, o: { repin: string }): typeof fetch {
  const agent = new Agent({ ca, keepAlive: true });
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.protocol !== 'https:') return fetch(input, init);
    try {
      return await httpsFetch(url, init ?? {}, agent);
    } catch (e) {
      if (!isUntrusted(e)) throw new TypeError('fetch failed', { cause: e });
      const presented = await presentedChain(url.origin).catch(() => []);
      const leaf = presented[0] === undefined ? 'unknown' : fingerprint(presented[0].toString());
      throw new LlmgwError(
        'unauthenticated',
        `refused: ${url.origin} presented a certificate (SHA-256 ${leaf}) that does not chain to the CA pinned for it (SHA-256 ${fingerprint(ca)}) [${messageOf(e)}]. If its certificates were replaced on purpose, pin again: ${o.repin}; if not, someone may be intercepting the connection`,
        { cause: e },
      );
    }
  };
}

function httpsFetch(url: URL, init: RequestInit, agent: Agent): Promise<Response> {
  return new Promise((resolve, reject) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const req = request(
      url,
      { method: init.method ?? 'GET', headers, agent, ...(init.signal ? { signal: init.signal } : {}) },
      (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers))
          for (const value of v === undefined ? [] : [v].flat()) h.append(k, value);
        const empty = init.method === 'HEAD' || res.statusCode === 204 || res.statusCode === 304;
        resolve(
          new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status: res.statusCode ?? 500,
            statusText: res.statusMessage ?? '',
            headers: h,
          }),
        );
      },
    );
    req.once('error', reject);
    if (typeof init.body === 'string') req.write(init.body);
    req.end();
  });
}
