/**
 * Serves files over real HTTP on a free port, answering `Range: bytes=a-b` with 206 and
 * `Content-Range: bytes a-b/total` as the hub's file servers do, and counting the bytes sent.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FileServer {
  url(path: string): string;
  /** Body bytes sent so far, over all requests. */
  bytesSent(): number;
  /** Each request's headers, in order. */
  requests: { path: string; headers: IncomingHttpHeaders }[];
  close(): Promise<void>;
}

export async function serveFiles(
  files: Record<string, Buffer>,
  options: { status?: number; ignoreRange?: boolean } = {},
): Promise<FileServer> {
  let sent = 0;
  const requests: FileServer['requests'] = [];
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    requests.push({ path, headers: req.headers });
    if (options.status !== undefined) {
      res.writeHead(options.status, { 'content-type': 'text/plain' }).end('refused\n');
      return;
    }
    const file = files[path];
    if (file === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Entry not found\n');
      return;
    }
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (m === null || options.ignoreRange === true) {
      sent += file.length;
      res.writeHead(200, { 'content-length': file.length, 'accept-ranges': 'bytes' }).end(file);
      return;
    }
    const start = Number(m[1]);
    const end = Math.min(m[2] === '' ? file.length - 1 : Number(m[2]), file.length - 1);
    if (start >= file.length) {
      res.writeHead(416, { 'content-range': `bytes */${file.length}` }).end();
      return;
    }
    const body = file.subarray(start, end + 1);
    sent += body.length;
    res
      .writeHead(206, {
        'content-length': body.length,
        'content-range': `bytes ${start}-${end}/${file.length}`,
        'accept-ranges': 'bytes',
      })
      .end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    bytesSent: () => sent,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err === undefined ? resolve() : reject(err)));
      }),
  };
}
