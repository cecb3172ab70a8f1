/**
 * The heads of HTTP/1.1 messages (RFC 9112), parsed strictly: anything this parser is not
 * sure of is reported as not understood, and the caller leaves that message to node:http,
 * whose parser is complete. Header names come back in lower case; a repeated header is
 * joined with ", " (RFC 9110, 5.3).
 */

export const headEnd = Buffer.from('\r\n\r\n');
/** Past this, a head is not ours to read (node:http's own limit is 16 KiB). */
export const maxHeadBytes = 16 * 1024;

export interface RequestHead {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** The body's length: 0 when no Content-Length was sent. */
  contentLength: number;
  /** The client asked to close the connection after this answer. */
  close: boolean;
}

export interface ResponseHead {
  status: number;
  headers: Record<string, string>;
  /** How the body ends: its length, chunked framing, none at all, or the connection's close. */
  framing: { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'none' } | { kind: 'close' };
  /** Whether the connection may carry another request after this answer. */
  reusable: boolean;
}

const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// eslint-disable-next-line no-control-regex -- a request target holds no control characters
const requestLine = /^([A-Z]+) (\/[^ \x00-\x1f\x7f]*) HTTP\/1\.1$/;
const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: [^\r\n]*)?$/;
const digits = /^\d{1,15}$/;

/**
 * The head of a request that a plain proxy path can take: HTTP/1.1, an origin-form target,
 * a body of known length or none. Undefined for everything else (chunked or absent framing
 * on a body, Expect, Upgrade, HTTP/1.0, a malformed line), which node:http then answers.
 */
export function parseRequestHead(head: string): RequestHead | undefined {
  const lines = head.split('\r\n');
  const m = requestLine.exec(lines[0] ?? '');
  if (m === null) return undefined;
  const headers = headerLines(lines);
  if (headers === undefined) return undefined;
  if (headers['transfer-encoding'] !== undefined || headers['expect'] !== undefined || headers['upgrade'] !== undefined) return undefined;
  const length = headers['content-length'];
  if (length !== undefined && !digits.test(length)) return undefined;
  return {
    method: m[1] as string,
    url: m[2] as string,
    headers,
    contentLength: length === undefined ? 0 : Number(length),
    close: hasToken(headers['connection'], 'close'),
  };
}

/** The head of an engine's answer; undefined when it is not a well-formed HTTP/1.x response. */
export function parseResponseHead(head: string, method: string): ResponseHead | undefined {
  const lines = head.split('\r\n');
  const m = statusLine.exec(lines[0] ?? '');
  if (m === null) return undefined;
  const headers = headerLines(lines);
  if (headers === undefined) return undefined;
  const status = Number(m[2]);
  const http10 = m[1] === '0';
  const connection = headers['connection'];
  let reusable = http10 ? hasToken(connection, 'keep-alive') : !hasToken(connection, 'close');
  let framing: ResponseHead['framing'];
  const te = headers['transfer-encoding'];
  const length = headers['content-length'];
  if (method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    framing = { kind: 'none' };
  } else if (te !== undefined) {
    // Chunked must be the last coding (RFC 9112, 6.3); anything else ends with the connection.
    if (lastToken(te) !== 'chunked') {
      framing = { kind: 'close' };
      reusable = false;
    } else {
      framing = { kind: 'chunked' };
    }
  } else if (length !== undefined) {
    if (!digits.test(length)) return undefined;
    framing = { kind: 'length', length: Number(length) };
  } else {
    framing = { kind: 'close' };
    reusable = false;
  }
  return { status, headers, framing, reusable };
}

function headerLines(lines: string[]): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    // No colon, or folded (obsolete) continuation lines: not for this parser.
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon);
    if (!token.test(name)) return undefined;
    const value = line.slice(colon + 1).trim();
    // eslint-disable-next-line no-control-regex -- a field value holds no control characters but tab
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) return undefined;
    const key = name.toLowerCase();
    const before = headers[key];
    if (before === undefined) {
      headers[key] = value;
    } else {
      // Two lengths that differ are a smuggling attempt; the same one twice is harmless.
      if (key === 'content-length' && before !== value) return undefined;
      if (key !== 'content-length') headers[key] = `${before}, ${value}`;
    }
  }
  return headers;
}

function hasToken(value: string | undefined, wanted: string): boolean {
  if (value === undefined) return false;
  return value.split(',').some((t) => t.trim().toLowerCase() === wanted);
}

function lastToken(value: string): string {
  const parts = value.split(',');
  return (parts[parts.length - 1] ?? '').trim().toLowerCase();
}
