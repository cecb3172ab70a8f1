import type { ClientResponse } from '../http1/client-io.js';

import { engineError, type OpenAiError } from './openai-errors.js';
import { seconds } from './waiting-room.js';

/**
 * A streamed request's answer while it waits for a replica to start: the 200 head of an
 * event stream goes out at once, then an SSE comment every few seconds so that proxies do
 * not cut a connection that looks idle. Once the wait is over, the request's own answer is
 * written through it as it would be to the client: the engine's stream passes as it is (its
 * head is already out), and any other answer (an error, the gateway's or the engine's, or
 * a plain body) becomes the stream's last event, `data: {"error": ...}`, as OpenAI's
 * streams carry errors. `headersSent` stays false until the answer's own head is written,
 * so a replica that fails before its first byte is still retried elsewhere.
 */
export class WaitingStream implements ClientResponse {
  readonly #res: ClientResponse;
  #heartbeat: NodeJS.Timeout | undefined;
  #sent = false;
  /** The answer is not a stream: its body, to be sent as an error event. */
  #plain: { status: number; parts: Buffer[] } | undefined;

  constructor(res: ClientResponse) {
    this.#res = res;
  }

  /** Writes the head and the first comment; another every `everyMs` until the wait ends. */
  open(o: { model: string; requestId: string; everyMs: number; now?: () => number }): void {
    const now = o.now ?? (() => performance.now());
    const since = now();
    this.#res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-request-id': o.requestId,
    });
    const comment = () =>
      this.#res.write(`: waiting for a replica of ${o.model} to start (${seconds(now() - since)} s)\n\n`);
    comment();
    this.#heartbeat = setInterval(comment, o.everyMs);
    this.#heartbeat.unref();
    this.#res.once('close', () => this.stopHeartbeat());
  }

  /** The wait is over: no more comments (they must not fall between the bytes of an event). */
  stopHeartbeat(): void {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }

  get headersSent(): boolean {
    return this.#sent;
  }

  get writableFinished(): boolean {
    return this.#res.writableFinished;
  }

  writeHead(status: number, headers: Record<string, string | number | string[]>): this {
    this.stopHeartbeat();
    this.#sent = true;
    const type = headers['content-type'] ?? headers['Content-Type'];
    if (status >= 400 || typeof type !== 'string' || !type.startsWith('text/event-stream'))
      this.#plain = { status, parts: [] };
    return this;
  }

  write(chunk: Buffer | string): boolean {
    this.stopHeartbeat();
    this.#sent = true;
    if (this.#plain !== undefined) {
      this.#plain.parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      return true;
    }
    return this.#res.write(chunk);
  }

  end(chunk?: Buffer | string): this {
    this.stopHeartbeat();
    this.#sent = true;
    const plain = this.#plain;
    if (plain === undefined) {
      if (chunk === undefined) this.#res.end();
      else this.#res.end(chunk);
      return this;
    }
    if (chunk !== undefined) plain.parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    this.#res.end(errorEvent(plain.status, Buffer.concat(plain.parts).toString('utf8')));
    return this;
  }

  once(event: 'drain' | 'close', listener: () => void): this {
    this.#res.once(event, listener);
    return this;
  }

  destroy(): void {
    this.stopHeartbeat();
    this.#res.destroy();
  }
}

/** An answer that is not a stream, as a stream's last event. */
export function errorEvent(status: number, body: string): string {
  const error: OpenAiError =
    status >= 400
      ? engineError(status, body)
      : {
          message: `the replica answered ${status} without a stream to a streamed request`,
          type: 'api_error',
          param: null,
          code: 'upstream_error',
        };
  return `data: ${JSON.stringify({ error })}\n\n`;
}
