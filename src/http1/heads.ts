/**
 * The heads of HTTP/1.1 messages (RFC 9112), parsed strictly: anything this parser is not
 * sure of is reported as not understood, and the caller leaves that message to node:http,
 * whose parser is complete. Header names come back in lower case; a repeated header is
 * joined with ", " (RFC 9110, 5.3).
 */

export const headEnd = Buffer.from('\r\n\r\n');
/**
 * node:http's limit on a request head (its maxHeaderSize, set to this). node:http counts
 * the target and the header fields only, so a whole head of at most this many bytes is one
 * it takes too; a longer one is left to it, which answers 431 past its count.
 */
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

/** Characters of a header name (RFC 9110 token), by char code. */
const tokenChar = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
  tokenChar[c.charCodeAt(0)] = 1;
const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: [^\r\n]*)?$/;
const digits = /^\d{1,15}$/;
/** Methods the fast path takes; node:http reads the others (it refuses those it does not know). */
const fastMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']);

/**
 * The head of a request that a plain proxy path can take: HTTP/1.1, a common method, an
 * origin-form target, a Host, a body of known length or none. Undefined for everything
 * else (chunked or absent framing on a body, two Content-Lengths, Expect, Upgrade,
 * HTTP/1.0, another method, a malformed line), which node:http then reads and answers. So
 * what this takes is a part of what node:http takes, and a request gets one answer
 * whichever of the two reads it.
 */
export function parseRequestHead(head: string): RequestHead | undefined {
  const eol = head.indexOf('\r\n');
  const lineEnd = eol < 0 ? head.length : eol;
  // METHOD SP origin-form SP HTTP/1.1, nothing else.
  const sp1 = head.indexOf(' ');
  const sp2 = head.indexOf(' ', sp1 + 1);
  if (sp1 <= 0 || sp2 < 0 || sp2 >= lineEnd) return undefined;
  if (lineEnd - sp2 !== 9 || !head.startsWith('HTTP/1.1', sp2 + 1)) return undefined;
  const method = head.slice(0, sp1);
  if (
    !fastMethods.has(method) ||
    head.charCodeAt(sp1 + 1) !== 47 /* / */ ||
    !visibleAscii(head, sp1 + 1, sp2)
  )
    return undefined;
  const headers = headerLines(head, lineEnd, true);
  if (headers === undefined) return undefined;
  // HTTP/1.1 requires a Host (RFC 9112, 3.2): node:http refuses a request without one.
  if (headers['host'] === undefined) return undefined;
  if (
    headers['transfer-encoding'] !== undefined ||
    headers['expect'] !== undefined ||
    headers['upgrade'] !== undefined
  )
    return undefined;
  const length = headers['content-length'];
  if (length !== undefined && !digits.test(length)) return undefined;
  return {
    method,
    url: head.slice(sp1 + 1, sp2),
    headers,
    contentLength: length === undefined ? 0 : Number(length),
    close: hasToken(headers['connection'], 'close'),
  };
}

/**
 * What is wrong, if anything, with a request head about to be written to an upstream: a
 * method that is not a token, a target that is not origin-form visible ASCII, a header name
 * that is not a token, or a value with a control character (CR, LF, NUL...) or a character
 * past 0xFF. Such a line would end early (a second request smuggled in after it) or not be
 * sent as given; it is never written.
 */
export function requestHeadProblem(
  method: string,
  path: string,
  headers: Readonly<Record<string, string>>,
): string | undefined {
  if (!isToken(method)) return `the method ${JSON.stringify(method)} is not an HTTP token`;
  if (path.charCodeAt(0) !== 47 /* / */ || !visibleAscii(path, 0, path.length))
    return `the target ${JSON.stringify(path)} is not a path of visible ASCII`;
  for (const name in headers) {
    if (!isToken(name)) return `the header name ${JSON.stringify(name)} is not an HTTP token`;
    const value = headers[name] as string;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if ((c < 32 && c !== 9) || c === 127 || c > 255)
        return `the value of header ${name} holds a character HTTP does not allow there (U+${c.toString(16).padStart(4, '0').toUpperCase()})`;
    }
  }
  return undefined;
}

function isToken(text: string): boolean {
  if (text === '') return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || tokenChar[c] !== 1) return false;
  }
  return true;
}

/**
 * Whether the bytes of a head not yet whole may still become one the fast path reads. One
 * that cannot (TLS bytes, a bare LF, a control byte) is left to node:http at once, which
 * refuses it then rather than waiting for an end of the head that never comes.
 */
export function mayBeHead(bytes: Buffer): boolean {
  const n = bytes.length;
  const first = bytes[0];
  if (first === undefined || first < 65 || first > 90) return false;
  for (let i = 1; i < n; i++) {
    const c = bytes[i] as number;
    if ((c >= 32 && c !== 127) || c === 9) continue;
    if (c === 13 && (i + 1 === n || bytes[i + 1] === 10)) continue;
    if (c === 10 && bytes[i - 1] === 13) continue;
    return false;
  }
  return true;
}

/** The head of an engine's answer; undefined when it is not a well-formed HTTP/1.x response. */
export function parseResponseHead(head: string, method: string): ResponseHead | undefined {
  const eol = head.indexOf('\r\n');
  const lineEnd = eol < 0 ? head.length : eol;
  const m = statusLine.exec(head.slice(0, lineEnd));
  if (m === null) return undefined;
  const headers = headerLines(head, lineEnd, false);
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

/**
 * The header fields after the start line, which ends at `from`. A request with two
 * Content-Lengths is not read (node:http refuses it, the same value twice included); an
 * answer may repeat the same one.
 */
function headerLines(head: string, from: number, request: boolean): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  const n = head.length;
  // One pass over the characters: the name (token characters up to the colon), then the
  // value (no control characters but tab) up to CRLF. Folded lines fail at their space.
  let i = from + 2;
  while (i < n) {
    const nameStart = i;
    let upper = false;
    let c = head.charCodeAt(i);
    while (c < 128 && tokenChar[c] === 1) {
      if (c >= 65 && c <= 90) upper = true;
      c = head.charCodeAt(++i);
    }
    if (i === nameStart || c !== 58) return undefined;
    const name = head.slice(nameStart, i);
    const key = upper ? name.toLowerCase() : name;
    const valueStart = ++i;
    while (i < n) {
      c = head.charCodeAt(i);
      if (c === 13) {
        if (head.charCodeAt(i + 1) !== 10) return undefined;
        break;
      }
      if ((c < 32 && c !== 9) || c === 127) return undefined;
      i++;
    }
    // Optional whitespace is spaces and tabs only (String.trim would also take 0xA0).
    let from = valueStart;
    let to = i;
    while (from < to && (head.charCodeAt(from) === 32 || head.charCodeAt(from) === 9)) from++;
    while (to > from && (head.charCodeAt(to - 1) === 32 || head.charCodeAt(to - 1) === 9)) to--;
    const value = head.slice(from, to);
    const before = headers[key];
    if (before === undefined) {
      headers[key] = value;
    } else if (key === 'content-length') {
      // Two lengths that differ are a smuggling attempt; the same one twice is harmless.
      if (request || before !== value) return undefined;
    } else {
      headers[key] = `${before}, ${value}`;
    }
    i += 2;
  }
  return headers;
}

/** Whether `text` holds only visible ASCII between `from` and `to`: node:http refuses other bytes in a target. */
function visibleAscii(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c <= 32 || c >= 127) return false;
  }
  return true;
}

function hasToken(value: string | undefined, wanted: string): boolean {
  if (value === undefined) return false;
  const lower = value.toLowerCase();
  if (lower === wanted) return true;
  if (!lower.includes(wanted)) return false;
  return value.split(',').some((t) => t.trim().toLowerCase() === wanted);
}

function lastToken(value: string): string {
  const parts = value.split(',');
  return (parts[parts.length - 1] ?? '').trim().toLowerCase();
}
