import { connect } from 'node:net';

/** One answer as read off the wire. */
export interface WireAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The body was not read whole: a stream left open (events), cut when the exchange was over. */
  cut: boolean;
}

/** What one connection got: its answers in order, and whether bytes came that are not HTTP answers. */
export interface WireResult {
  answers: WireAnswer[];
  /** Bytes after the last whole answer that do not make one. */
  junk: string | undefined;
  /** Neither closed nor answered within the time given. */
  hung: boolean;
}

/**
 * Writes `bytes` on a new connection to 127.0.0.1:`port` and reads answers until the server
 * closes. `end`: the client ends its side after writing (a request cut short is seen as cut
 * at once, not when the server's time for it runs out); node:http takes a client's end as
 * the client gone, so a whole request is sent with `Connection: close` instead. A 2xx
 * stream that does not end (server-sent events) is cut after its head: only its head counts.
 */
export function exchange(
  port: number,
  bytes: Buffer,
  o: { headOnly: boolean; ms: number; end: boolean },
): Promise<WireResult> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (hung: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parse(buf, o.headOnly, hung), hung: hung && !streamOpen(buf) });
    };
    const timer = setTimeout(() => finish(true), o.ms);
    socket.on('connect', () => {
      if (o.end) socket.end(bytes);
      else socket.write(bytes);
    });
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      // An event stream stays open: its head is its answer.
      if (streamOpen(buf)) setTimeout(() => finish(false), 20);
    });
    // A reset after the answer is a close; one before it is no answer (judged by the caller).
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
  });
}

function streamOpen(buf: Buffer): boolean {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const head = buf.toString('latin1', 0, end).toLowerCase();
  return /^http\/1\.1 2\d\d/.test(head) && head.includes('content-type: text/event-stream');
}

function parse(buf: Buffer, headOnly: boolean, hung: boolean): Omit<WireResult, 'hung'> {
  const answers: WireAnswer[] = [];
  let at = 0;
  while (at < buf.length) {
    const end = buf.indexOf('\r\n\r\n', at);
    if (end < 0) return { answers, junk: buf.toString('latin1', at, at + 300) };
    const lines = buf.toString('latin1', at, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3}) /.exec(lines[0] ?? '');
    if (m === null) return { answers, junk: buf.toString('latin1', at, at + 300) };
    const status = Number(m[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) return { answers, junk: `a header line without a name: ${JSON.stringify(line)}` };
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    at = end + 4;
    // A refusal of a head the server could not read has a body, whatever the method was.
    const declared = Number(headers['content-length'] ?? -1);
    if (headOnly && status >= 400 && buf.length - at === declared) {
      answers.push({ status, headers, body: buf.subarray(at), cut: false });
      break;
    }
    if (headOnly || status === 204 || status === 304 || (status >= 100 && status < 200)) {
      if (status >= 200) answers.push({ status, headers, body: Buffer.alloc(0), cut: false });
      continue;
    }
    const length = headers['content-length'];
    if (length !== undefined) {
      const stop = at + Number(length);
      answers.push({
        status,
        headers,
        body: buf.subarray(at, Math.min(stop, buf.length)),
        cut: stop > buf.length,
      });
      at = stop;
      continue;
    }
    if ((headers['transfer-encoding'] ?? '').includes('chunked')) {
      const parts: Buffer[] = [];
      let cut = true;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', at);
        if (lineEnd < 0) break;
        const size = parseInt(buf.toString('latin1', at, lineEnd), 16);
        if (!Number.isFinite(size))
          return { answers, junk: `a bad chunk size: ${buf.toString('latin1', at, lineEnd)}` };
        at = lineEnd + 2;
        if (size === 0) {
          at += 2;
          cut = false;
          break;
        }
        parts.push(buf.subarray(at, Math.min(at + size, buf.length)));
        at += size + 2;
      }
      answers.push({ status, headers, body: Buffer.concat(parts), cut: cut || hung });
      continue;
    }
    answers.push({ status, headers, body: buf.subarray(at), cut: hung });
    at = buf.length;
  }
  return { answers, junk: undefined };
}
