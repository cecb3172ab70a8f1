/**
 * One HTTP/1.1 GET over its own connection (TCP, or TLS for https), the body handed on as the
 * buffers the socket read. Downloads are long streams of bytes: without node:http's parser and
 * stream layers in the way this costs about half the CPU per byte (and undici's web streams
 * cost more still), which on a busy machine is the difference between keeping up with curl or
 * not. Heads are parsed by http1's strict parser; chunked bodies by its decoder.
 */
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { LlmgwError } from '../core/errors.js';
import { ChunkedDecoder } from '../http1/chunked-decoder.js';
import { headEnd, parseResponseHead, requestHeadProblem, type ResponseHead } from '../http1/heads.js';

/** A head longer than this is not an answer we read (CDNs send a few kB). */
const maxAnswerHead = 64 * 1024;

export interface HttpAnswer {
  status: number;
  header(name: string): string | null;
  /**
   * Passes each body chunk to `take` until the body ends; a promise `take` returns pauses the
   * body until it settles. Rejects when the connection ends before the body does.
   */
  pump(take: (chunk: Uint8Array) => Promise<void> | undefined): Promise<void>;
  /** Leaves the body unread (the connection is closed). */
  drop(): Promise<void>;
}

/** The certificate errors of a TLS handshake, which no retry mends. */
const certificateCodes = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_UNTRUSTED',
]);

/**
 * CAs trusted for one origin instead of the system's: a node's agent trusts the cluster CA it
 * pinned for its control plane, whose mirror it downloads model files from.
 */
const originCas = new Map<string, string>();

export function trustCaForOrigin(origin: string, ca: string): void {
  originCas.set(new URL(origin).origin, ca);
}

function openSocket(url: URL): Socket {
  // URL keeps an IPv6 host in brackets; sockets want it bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (url.protocol === 'https:') {
    return tlsConnect({
      host,
      port: Number(url.port || 443),
      ...(isIP(host) === 0 ? { servername: host } : {}),
      ALPNProtocols: ['http/1.1'],
      ...(originCas.has(url.origin) ? { ca: originCas.get(url.origin) } : {}),
    });
  }
  return netConnect({ host, port: Number(url.port || 80) });
}

/** GETs `url` (no redirect followed); resolves once the answer's head is read. */
export function httpGet(
  url: URL,
  init: { headers: Record<string, string>; signal: AbortSignal },
): Promise<HttpAnswer> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return Promise.reject(new LlmgwError('invalid_argument', `${url.origin} is not an http(s) address`));
  }
  const target = `${url.pathname}${url.search}`;
  const headers: Record<string, string> = { host: url.host };
  for (const [name, value] of Object.entries(init.headers)) headers[name.toLowerCase()] = value;
  headers['connection'] = 'close';
  const problem = requestHeadProblem('GET', target, headers);
  if (problem !== undefined) {
    return Promise.reject(new LlmgwError('invalid_argument', `cannot ask ${url.origin}: ${problem}`));
  }
  let head = `GET ${target} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  head += '\r\n';

  return new Promise((resolve, reject) => {
    init.signal.throwIfAborted();
    const socket = openSocket(url);
    const onAbort = () => socket.destroy(init.signal.reason as Error);
    init.signal.addEventListener('abort', onAbort, { once: true });
    socket.once('close', () => init.signal.removeEventListener('abort', onAbort));
    socket.setNoDelay(true);
    socket.write(head, 'latin1');

    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const failEarly = (e: Error) => {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== undefined && certificateCodes.has(code)) {
        reject(
          new LlmgwError(
            'unavailable',
            `the certificate of ${url.host} is not trusted (${e.message}): if a proxy or a private mirror signs with its own authority, give Node its certificate with NODE_EXTRA_CA_CERTS`,
          ),
        );
      } else reject(e);
    };
    const closedEarly = () => reject(new Error(`${url.host} closed the connection before answering`));
    const onHeadData = (chunk: Buffer) => {
      pending.push(chunk);
      pendingBytes += chunk.length;
      const all = pending.length === 1 ? chunk : Buffer.concat(pending, pendingBytes);
      pending = [all];
      let at = 0;
      for (;;) {
        const end = all.indexOf(headEnd, at);
        if (end < 0) {
          if (pendingBytes - at > maxAnswerHead) {
            socket.destroy();
            reject(new Error(`${url.host} sent a head longer than ${maxAnswerHead} bytes`));
          }
          return;
        }
        const parsed = parseResponseHead(all.toString('latin1', at, end), 'GET');
        if (parsed === undefined) {
          socket.destroy();
          reject(new Error(`${url.host} did not answer in HTTP/1.1`));
          return;
        }
        at = end + headEnd.length;
        // An interim answer (100 Continue, 103 Early Hints) precedes the real one.
        if (parsed.status >= 100 && parsed.status < 200) continue;
        socket.off('data', onHeadData);
        socket.off('error', failEarly);
        socket.off('close', closedEarly);
        socket.pause();
        resolve(answer(socket, parsed, all.subarray(at)));
        return;
      }
    };
    socket.on('data', onHeadData);
    socket.once('error', failEarly);
    socket.once('close', closedEarly);
  });
}

function answer(socket: Socket, head: ResponseHead, first: Buffer): HttpAnswer {
  // Listened for from here on, so an error between the head and pump() is kept, not thrown.
  const state: { error?: Error; closed: boolean; onClose?: () => void } = { closed: false };
  socket.on('error', (e) => {
    state.error ??= e;
  });
  socket.once('close', () => {
    state.closed = true;
    state.onClose?.();
  });
  return {
    status: head.status,
    header: (name) => head.headers[name] ?? null,
    drop: () => {
      socket.destroy();
      return Promise.resolve();
    },
    pump: (take) =>
      new Promise<void>((done, fail) => {
        const framing = head.framing;
        let left = framing.kind === 'length' ? framing.length : Infinity;
        const chunked = framing.kind === 'chunked' ? new ChunkedDecoder() : undefined;
        // In an object: TypeScript would take plain locals set in callbacks for constants.
        const flow = { finished: false, waiting: false };
        const end = (e?: Error) => {
          if (flow.finished) return;
          flow.finished = true;
          socket.destroy();
          if (e === undefined) done();
          else fail(e);
        };
        const waitFor = (wait: Promise<void>, last: boolean) => {
          flow.waiting = true;
          socket.pause();
          wait.then(
            () => {
              flow.waiting = false;
              if (last) end();
              else if (flow.finished) return;
              else if (state.closed) state.onClose?.();
              else socket.resume();
            },
            (e: unknown) => end(e instanceof Error ? e : new Error(String(e))),
          );
        };
        const onData = (chunk: Buffer) => {
          if (flow.finished) return;
          let wait: Promise<void> | undefined;
          let last: boolean;
          if (chunked !== undefined) {
            try {
              chunked.push(chunk, (piece) => {
                wait = take(piece) ?? wait;
              });
            } catch (e) {
              end(e as Error);
              return;
            }
            last = chunked.done;
          } else {
            const piece = chunk.length > left ? chunk.subarray(0, left) : chunk;
            left -= piece.length;
            if (piece.length > 0) wait = take(piece);
            last = left === 0;
          }
          // After the last bytes, the caller's write of them is still waited for.
          if (wait !== undefined) waitFor(wait, last);
          else if (last) end();
        };
        state.onClose = () => {
          if (flow.finished || flow.waiting) return;
          if (framing.kind === 'close' && state.error === undefined) end();
          else end(state.error ?? new Error('the connection closed before the body ended'));
        };
        socket.on('data', onData);
        if (framing.kind === 'none') {
          end();
          return;
        }
        if (first.length > 0) onData(first);
        if (flow.finished) return;
        if (state.closed) state.onClose();
        else if (!flow.waiting) socket.resume();
      }),
  };
}
