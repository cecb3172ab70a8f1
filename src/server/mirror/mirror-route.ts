import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';

import type { Logger } from 'pino';

import type { ErrorBody } from '../../core/api-types.js';
import { isLlmgwError, LlmgwError, messageOf } from '../../core/errors.js';
import { clientText, redact } from '../../core/redact.js';
import type { RequestHandler } from '../../http1/http-server.js';
import { apiPrefix } from '../../protocol/api-paths.js';

import type { MirrorAuthorizer } from './mirror-auth.js';
import type { Mirror } from './mirror.js';
import { parseRange } from './range.js';

/** Mounted on the control plane's server ahead of the API (its bodies are streamed, not JSON). */
export const mirrorPrefix = `${apiPrefix}/mirror/`;
/** `GET|HEAD /api/v1/mirror/blobs/KEY`, KEY the blob key of cache-layout.ts. */
export const mirrorBlobsPath = `${mirrorPrefix}blobs/`;

export interface MirrorRouteOptions {
  mirror: Mirror;
  authorize: MirrorAuthorizer;
  logger: Logger;
}

/**
 * The mirror's route, on node:http directly: a blob is streamed from its file (or from the
 * fetch in progress) with backpressure, without a framework between the disk and the socket.
 */
export function mirrorRoute(o: MirrorRouteOptions): RequestHandler {
  return (req, res) => {
    void serve(o, req, res);
  };
}

async function serve(o: MirrorRouteOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = performance.now();
  const method = req.method ?? 'GET';
  const path = (req.url ?? '/').split('?')[0] ?? '/';
  const seen: { who?: string; key?: string; range?: string } = {};
  if (req.headers.range !== undefined) seen.range = clientText(req.headers.range, 80);
  const done = (status: number, error?: string) => {
    o.logger.info(
      {
        ...seen,
        method,
        status,
        ms: Math.round(performance.now() - started),
        ...(error === undefined ? {} : { error }),
      },
      'mirror request',
    );
  };
  try {
    const key = path.startsWith(mirrorBlobsPath) ? path.slice(mirrorBlobsPath.length) : '';
    if (key === '' || key.includes('/') || (method !== 'GET' && method !== 'HEAD')) {
      throw new LlmgwError(
        'not_found',
        `no API route ${method} ${clientText(path)}: the mirror answers GET and HEAD ${mirrorBlobsPath}KEY`,
      );
    }
    seen.key = clientText(key, 80);
    seen.who = await o.authorize(req);
    if (!o.mirror.enabled) {
      throw new LlmgwError(
        'unavailable',
        'the mirror is disabled (mirror.enabled: false): agents fetch from the hub',
      );
    }
    const blob = o.mirror.find(key);
    const asked = parseRange(req.headers.range, blob.size);
    if (asked === 'unsatisfiable') {
      res.setHeader('content-range', `bytes */${blob.size}`);
      throw new LlmgwError(
        'range_not_satisfiable',
        `the range "${clientText(req.headers.range ?? '', 80)}" is not within ${blob.file.path} (${blob.size} bytes): ask for one range, bytes=A-B, bytes=A- or bytes=-N, inside the file`,
      );
    }
    const range = asked ?? { start: 0, end: blob.size - 1 };
    const headers: OutgoingHttpHeaders = {
      'content-type': 'application/octet-stream',
      'content-length': range.end - range.start + 1,
      etag: `"${key}"`,
      'accept-ranges': 'bytes',
    };
    if (asked !== undefined) headers['content-range'] = `bytes ${range.start}-${range.end}/${blob.size}`;
    const status = asked === undefined ? 200 : 206;
    if (method === 'HEAD') {
      res.writeHead(status, headers);
      res.end();
      done(status);
      return;
    }
    const body = await o.mirror.read(key, range);
    if (req.socket.destroyed) {
      body.destroy();
      done(499, 'the client went away before the first byte');
      return;
    }
    res.writeHead(status, headers);
    await pipeline(body, res);
    done(status);
  } catch (e) {
    if (res.headersSent) {
      // The status is sent: all that can be said now is that the body is short.
      res.destroy();
      done(res.statusCode, redact(messageOf(e)));
      return;
    }
    const error = isLlmgwError(e)
      ? e
      : new LlmgwError('internal', 'internal error in the mirror (see the control plane log)', { cause: e });
    if (error.code === 'internal') o.logger.error({ err: redact(messageOf(e)) }, 'mirror internal error');
    const text = JSON.stringify({
      error: { code: error.code, message: redact(error.message) },
    } satisfies ErrorBody);
    res.writeHead(error.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
    done(error.status, error.code === 'internal' ? undefined : error.message);
  }
}
