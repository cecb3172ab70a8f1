import type { IncomingMessage } from 'node:http';

import { BodyTooLargeError } from './fast-request.js';

/**
 * A request and its answer as a handler of the gateway's kind sees them, whichever HTTP layer read them:
 * the front door's fast path, or node:http for what the front door leaves to it.
 */
export interface GatewayRequest {
  readonly method: string | undefined;
  readonly url: string | undefined;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The whole body; rejects with BodyTooLargeError past `limit`. */
  body(limit: number): Promise<Buffer>;
}

/** The part of node:http's ServerResponse the gateway uses; the front door's answer has it too. */
export interface ClientResponse {
  readonly headersSent: boolean;
  readonly writableFinished: boolean;
  writeHead(status: number, headers: Record<string, string | number | string[]>): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  destroy(): unknown;
}

/** A node:http request as the gateway reads it. */
export function nodeRequest(req: IncomingMessage): GatewayRequest {
  return { method: req.method, url: req.url, headers: req.headers, body: (limit) => readBody(req, limit) };
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(new BodyTooLargeError(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () =>
      resolve(chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks)),
    );
    req.on('error', reject);
  });
}
