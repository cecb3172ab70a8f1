/**
 * Serves files over real HTTP on a free port with single-range support (206 and Content-Range,
 * 416 past the end), logging each request's Range and Authorization, and misbehaving on cue:
 * a connection cut or stalled after some bytes, the range ignored, other bytes, a status, a redirect.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  path: string;
  range: string | undefined;
  authorization: string | undefined;
}

/** How to answer one request; what is absent behaves well. */
export interface Plan {
  status?: number;
  headers?: Record<string, string>;
  /** Answer 200 with the whole file whatever the Range. */
  ignoreRange?: boolean;
  /** Send this many body bytes, then destroy the connection. */
  cutAfter?: number;
  /** Send this many body bytes, then nothing more (the connection stays open). */
  stallAfter?: number;
  /** 302 to this address. */
  redirect?: string;
  /** Serve these bytes instead of the file's (same length: a corrupted copy). */
  body?: Buffer;
}

export interface RangeServer {
  url(path: string): string;
  origin: string;
  requests: SeenRequest[];
  /** Body bytes sent so far, over all requests. */
  bytesSent(): number;
  close(): Promise<void>;
}

const piece = 64 * 1024;

function send(res: ServerResponse, body: Buffer, plan: Plan, count: (n: number) => void): void {
  const limit = Math.min(body.length, plan.cutAfter ?? plan.stallAfter ?? body.length);
  let at = 0;
  const next = (): void => {
    while (at < limit) {
      const chunk = body.subarray(at, Math.min(limit, at + piece));
      at += chunk.length;
      count(chunk.length);
      if (!res.write(chunk)) {
        res.once('drain', next);
        return;
      }
    }
    if (limit === body.length) res.end();
    // Written bytes reach the socket before it is torn down.
    else if (plan.cutAfter !== undefined) setTimeout(() => res.socket?.destroy(), 20);
  };
  next();
}

export async function serveRanges(
  files: Record<string, Buffer>,
  plan?: (req: SeenRequest, index: number) => Plan | undefined,
): Promise<RangeServer> {
  const requests: SeenRequest[] = [];
  let sent = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const seen = { path: req.url ?? '/', range: req.headers.range, authorization: req.headers.authorization };
    requests.push(seen);
    const p = plan?.(seen, requests.length - 1) ?? {};
    if (p.redirect !== undefined) {
      res.writeHead(302, { location: p.redirect, 'content-length': 0 }).end();
      return;
    }
    if (p.status !== undefined) {
      res.writeHead(p.status, { 'content-type': 'text/plain', ...p.headers }).end('refused\n');
      return;
    }
    const file = files[seen.path];
    if (file === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    const bytes = p.body ?? file;
    const m = /^bytes=(\d+)-(\d*)$/.exec(seen.range ?? '');
    const count = (n: number) => (sent += n);
    if (m === null || p.ignoreRange === true) {
      res.writeHead(200, { 'content-length': bytes.length, 'accept-ranges': 'bytes', ...p.headers });
      send(res, bytes, p, count);
      return;
    }
    const start = Number(m[1]);
    const end = Math.min(m[2] === '' ? bytes.length - 1 : Number(m[2]), bytes.length - 1);
    if (start >= bytes.length || start > end) {
      res.writeHead(416, { 'content-range': `bytes */${bytes.length}` }).end();
      return;
    }
    res.writeHead(206, {
      'content-length': end - start + 1,
      'content-range': `bytes ${start}-${end}/${bytes.length}`,
      'accept-ranges': 'bytes',
      ...p.headers,
    });
    send(res, bytes.subarray(start, end + 1), p, count);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: (path) => `${origin}${path}`,
    origin,
    requests,
    bytesSent: () => sent,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err === undefined ? resolve() : reject(err)));
      }),
  };
}
