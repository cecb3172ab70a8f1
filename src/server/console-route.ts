import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { RequestHandler } from '../http1/http-server.js';

/**
 * Where `npm run build` puts the console (console/vite.config.ts): dist/console at the package's
 * root, two folders above this file whether it runs from src/server or dist/server.
 */
export const defaultConsoleDir = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/** Paths that belong to the API, the gateway and the metrics: never the console's. */
const reserved = ['/api', '/v1', '/metrics'];

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * Everything the console needs comes from this origin, and nothing runs that is not a file of
 * the build: no inline scripts or styles, no frames, no other hosts. React sets style
 * properties through the DOM, which style-src does not restrict.
 */
export const consoleCsp = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const securityHeaders = {
  'content-security-policy': consoleCsp,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

// Vite names built assets by their content's hash: one name, one content, forever.
const immutable = 'public, max-age=31536000, immutable';

const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>llmgw</title></head>
<body><h1>llmgw</h1>
<p>The web console is not built in this copy of llmgw: run <code>npm run build</code> in its folder, then reload.
The API is under <code>/api/v1</code> and the gateway under <code>/v1</code> meanwhile.</p>
</body></html>
`;

export interface ConsoleRouteOptions {
  /** The built console (index.html and assets/); default dist/console. */
  dir?: string;
  /** What answers the API's, the gateway's and unknown non-GET paths: the server's JSON 404. */
  notFound: RequestHandler;
}

/**
 * Serves the built console at /: its files, and index.html for every other GET path so the
 * console's own routes (/nodes, /models) load on a reload. Requests no file answers under
 * /assets/ are 404s (an old page asking for an asset of an older build), never index.html.
 */
export function consoleRoute(o: ConsoleRouteOptions): RequestHandler {
  const dir = resolve(o.dir ?? defaultConsoleDir);
  return (req, res) => {
    const path = pathOf(req);
    const method = req.method ?? 'GET';
    if (
      path === undefined ||
      (method !== 'GET' && method !== 'HEAD') ||
      reserved.some((p) => path === p || path.startsWith(`${p}/`))
    ) {
      o.notFound(req, res);
      return;
    }
    void serve({ dir, path, req, res }).catch((e: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(`the console's files could not be read: ${e instanceof Error ? e.message : String(e)}`);
      } else res.destroy();
    });
  };
}

function pathOf(req: IncomingMessage): string | undefined {
  try {
    return decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  } catch {
    return undefined;
  }
}

async function serve(o: { dir: string; path: string; req: IncomingMessage; res: ServerResponse }) {
  const file = resolve(join(o.dir, o.path));
  // A path that climbs out of the folder (/../x) finds nothing, rather than another file.
  const inside = file.startsWith(o.dir + sep);
  if (inside && (await isFile(file))) {
    const type = contentTypes[extname(file).toLowerCase()] ?? 'application/octet-stream';
    const cache = o.path.startsWith('/assets/') ? immutable : 'no-cache';
    send(o.req, o.res, { status: 200, type, cache, body: await readFile(file) });
    return;
  }
  if (o.path.startsWith('/assets/')) {
    send(o.req, o.res, {
      status: 404,
      type: 'text/plain; charset=utf-8',
      cache: 'no-cache',
      body: Buffer.from(`no console asset ${o.path}: reload the page to load the current build\n`),
    });
    return;
  }
  const index = join(o.dir, 'index.html');
  if (!(await isFile(index))) {
    send(o.req, o.res, {
      status: 503,
      type: 'text/html; charset=utf-8',
      cache: 'no-cache',
      body: Buffer.from(notBuilt),
    });
    return;
  }
  send(o.req, o.res, {
    status: 200,
    type: 'text/html; charset=utf-8',
    cache: 'no-cache',
    body: await readFile(index),
  });
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

function send(
  req: IncomingMessage,
  res: ServerResponse,
  a: { status: number; type: string; cache: string; body: Buffer },
): void {
  res.writeHead(a.status, {
    ...securityHeaders,
    'content-type': a.type,
    'content-length': a.body.length,
    'cache-control': a.cache,
  });
  res.end(req.method === 'HEAD' ? undefined : a.body);
}
