/**
 * The fuzz scenario's requests: each one bytes to write on a fresh connection, drawn from a
 * seeded generator so that a failure is replayed by its seed and index. Families: bytes that
 * are not HTTP, broken request lines, headers and framing, and well-framed requests to every
 * route of /v1 and /api/v1 with bad keys, bad bodies, odd paths and oversized bodies.
 */

/** The same seed gives the same requests. */
export { seeded as prng } from '../support/timing.js';

export interface FuzzCase {
  /** The family it was drawn from: counted in the report, named in a failure. */
  family: string;
  bytes: Buffer;
  /** Which error shape a refusal must have: OpenAI's (/v1 and the HTTP layer) or the API's. */
  api: boolean;
  /** Not well-formed HTTP: answered 4xx, or closed without an answer where nothing can be. */
  garbage: boolean;
  /** An answer to HEAD has no body. */
  head: boolean;
}

export interface FuzzKeys {
  admin: string;
  user: string;
}

export interface FuzzTarget {
  keys: FuzzKeys;
  /** The model the gateway serves. */
  model: string;
  /** gateway.max_body_mb, in bytes. */
  maxBodyBytes: number;
}

type Rng = () => number;

const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const pick = <T>(r: Rng, list: readonly T[]): T => list[Math.floor(r() * list.length)] as T;
const chance = (r: Rng, p: number) => r() < p;

function randomBytes(r: Rng, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(r() * 256);
  return b;
}

function randomAscii(r: Rng, n: number, alphabet?: string): string {
  let s = '';
  for (let i = 0; i < n; i++)
    s +=
      alphabet === undefined
        ? String.fromCharCode(int(r, 0x20, 0x7e))
        : alphabet.charAt(int(r, 0, alphabet.length - 1));
  return s;
}

const oddText = [
  '\u202eevil\u202c',
  '😀🚀',
  'e\u0301\u0301\u0301',
  '\u200b\u200d\ufeff',
  '\u0000',
  '\ud800',
  '\udfff\ud800',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  'ﷺ'.repeat(50),
  'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇',
  '\r\n',
  '../../etc/passwd',
  "' OR 1=1 --",
  '${jndi:ldap://x}',
];

function oddString(r: Rng): string {
  const n = int(r, 1, 4);
  let s = '';
  for (let i = 0; i < n; i++) s += chance(r, 0.5) ? pick(r, oddText) : randomAscii(r, int(r, 0, 12));
  return s;
}

/** A random JSON value, nested a little. */
function randomValue(r: Rng, depth = 0): unknown {
  const k = int(r, 0, depth > 2 ? 5 : 7);
  switch (k) {
    case 0:
      return null;
    case 1:
      return chance(r, 0.5);
    case 2:
      return pick(r, [0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, 4096, 1e9]);
    case 3:
    case 4:
      return oddString(r);
    case 5:
      return '';
    case 6:
      return Array.from({ length: int(r, 0, 3) }, () => randomValue(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = int(r, 0, 3); i > 0; i--)
        o[pick(r, ['role', 'content', 'model', 'x', oddString(r)])] = randomValue(r, depth + 1);
      return o;
    }
  }
}

/** Nested arrays or objects `depth` deep: a parser that recurses runs out of stack. */
function deepJson(r: Rng, depth: number): string {
  if (chance(r, 0.5)) return '['.repeat(depth) + ']'.repeat(depth);
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

function validGeneration(r: Rng, t: FuzzTarget, path: string): Record<string, unknown> {
  const stream = chance(r, 0.3);
  const base: Record<string, unknown> = { model: t.model, max_tokens: int(r, 1, 3) };
  if (stream) base['stream'] = true;
  if (path.endsWith('/embeddings')) return { model: t.model, input: oddString(r) };
  if (path.endsWith('/completions') && !path.includes('chat')) return { ...base, prompt: oddString(r) };
  return { ...base, messages: [{ role: 'user', content: oddString(r) }] };
}

/** A body for a JSON route: valid, broken in one of many ways, or too large. */
function body(r: Rng, t: FuzzTarget, path: string): { text: Buffer; family: string } {
  const valid = validGeneration(r, t, path);
  const k = int(r, 0, 12);
  const b = (s: string | Buffer) => (typeof s === 'string' ? Buffer.from(s) : s);
  switch (k) {
    case 0:
    case 1:
      return { text: b(JSON.stringify(valid)), family: 'valid body' };
    case 2: {
      const s = JSON.stringify(valid);
      return { text: b(s.slice(0, int(r, 0, s.length - 1))), family: 'truncated JSON' };
    }
    case 3:
      return { text: randomBytes(r, int(r, 0, 300)), family: 'random body bytes' };
    case 4:
      return {
        text: b(pick(r, ['', 'null', '[]', '123', '"x"', 'true', '{', '}', '{"model":}', '\ufeff{}'])),
        family: 'not an object',
      };
    case 5: {
      // Each field of a valid request, in turn, of a wrong type.
      const field = pick(r, [
        'model',
        'messages',
        'prompt',
        'input',
        'max_tokens',
        'stream',
        'stream_options',
        'n',
        'temperature',
        'tools',
        'lora',
      ]);
      return { text: b(JSON.stringify({ ...valid, [field]: randomValue(r) })), family: 'wrong types' };
    }
    case 6:
      return { text: b(JSON.stringify(randomValue(r))), family: 'random JSON' };
    case 7: {
      const depth = pick(r, [100, 1000, 10_000, 50_000]);
      const where = pick(r, ['messages', 'model', 'stream_options', 'x']);
      const s = JSON.stringify({ ...valid, [where]: 0 }).replace(
        `"${where}":0`,
        `"${where}":${deepJson(r, depth)}`,
      );
      return { text: b(s), family: 'deeply nested JSON' };
    }
    case 8:
      return { text: b(JSON.stringify({ ...valid, model: oddString(r) })), family: 'odd model name' };
    case 9: {
      // Invalid UTF-8 inside a JSON string.
      const s = JSON.stringify(valid);
      const cut = s.indexOf('"', 2);
      return {
        text: Buffer.concat([b(s.slice(0, cut + 1)), Buffer.from([0xff, 0xfe, 0xc3]), b(s.slice(cut + 1))]),
        family: 'invalid UTF-8',
      };
    }
    case 10:
      return {
        text: b(JSON.stringify({ ...valid, model: 'm'.repeat(int(r, 64, 5000)) })),
        family: 'long model name',
      };
    case 11:
      return {
        text: b(JSON.stringify({ ...valid, extra: 'x'.repeat(t.maxBodyBytes + int(r, 1, 4096)) })),
        family: 'body over max_body_mb',
      };
    default:
      return {
        text: b(
          JSON.stringify({
            ...valid,
            [oddString(r)]: oddString(r),
            __proto__: { polluted: true },
            constructor: { prototype: 1 },
          }),
        ),
        family: 'odd keys',
      };
  }
}

const v1Paths = [
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/models',
  '/v1/models/MODEL',
  '/v1/responses',
  '/v1/',
  '/v1/unknown',
  '/v1/chat/completions/x',
  '/v1//chat/completions',
  '/v1/chat%2Fcompletions',
  '/v1/%2e%2e/api/v1/keys',
  '/v1/../api/v1/keys',
  '/v1/chat/completions;x=1',
  '/v1/%00',
  '/v1/%zz',
];

const apiPaths = [
  '/api/v1/health',
  '/api/v1/whoami',
  '/api/v1/models',
  '/api/v1/models/MODEL',
  '/api/v1/models/NAME',
  '/api/v1/models/MODEL/scale',
  '/api/v1/models/NAME/context',
  '/api/v1/models/NAME/gpus',
  '/api/v1/replicas',
  '/api/v1/replicas/NAME',
  '/api/v1/keys',
  '/api/v1/keys/NAME',
  '/api/v1/nodes',
  '/api/v1/nodes/NAME',
  '/api/v1/node-tokens',
  '/api/v1/node-tokens/NAME',
  '/api/v1/config',
  '/api/v1/plan',
  '/api/v1/events',
  '/api/v1/status',
  '/api/v1/usage',
  '/api/v1/audit',
  '/api/v1/cache',
  '/api/v1/gateway/routes',
  '/api/v1/gateway/usage',
  '/api/v1/traffic',
  '/api/v1/agent/token',
  '/api/v1/agent',
  '/api/v1/unknown',
  '/api/v1/',
  '/api/v1//models',
  '/api/v1/models/%ff',
  '/api/v1/models/%',
];

/** Every byte of the UTF-8 percent-encoded (a lone surrogate becomes U+FFFD, as a client would send it). */
function percentEncode(text: string): string {
  let out = '';
  for (const b of Buffer.from(text)) out += `%${b.toString(16).padStart(2, '0')}`;
  return out;
}

function path(r: Rng, t: FuzzTarget, api: boolean): string {
  let p = pick(r, api ? apiPaths : v1Paths)
    .replace('MODEL', t.model)
    .replace('NAME', () => percentEncode(pick(r, ['x', oddString(r), 'a'.repeat(int(r, 64, 3000))])));
  if (chance(r, 0.3)) p += `?${query(r)}`;
  return p;
}

function query(r: Rng): string {
  const parts: string[] = [];
  for (let i = int(r, 1, 4); i > 0; i--) {
    const k = pick(r, [
      'purge',
      'model',
      'since',
      'limit',
      'watch',
      'x',
      '%zz',
      '',
      percentEncode(randomAscii(r, 3)),
    ]);
    const v = pick(r, [
      'true',
      '-1',
      '1e999',
      '%',
      '%ff%fe',
      percentEncode(oddString(r)),
      'a'.repeat(int(r, 0, 2000)),
      '',
    ]);
    parts.push(`${k}=${v}`);
  }
  return parts.join(pick(r, ['&', ';', '&&']));
}

const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'CONNECT'];

function auth(r: Rng, keys: FuzzKeys): [string, string][] {
  const k = int(r, 0, 9);
  if (k <= 2) return [['Authorization', `Bearer ${keys.user}`]];
  if (k <= 4) return [['Authorization', `Bearer ${keys.admin}`]];
  if (k === 5) return [];
  const bad = pick(r, [
    'Bearer',
    'Bearer ',
    `Bearer ${keys.user}x`,
    `bearer ${keys.user}`,
    `Basic ${Buffer.from('a:b').toString('base64')}`,
    `Bearer llmgw_key_${randomAscii(r, 40, 'abcdef0123456789')}`,
    `Bearer ${'k'.repeat(int(r, 100, 8000))}`,
    `Bearer ${randomAscii(r, 20)}`,
    `Bearer ${keys.user} ${keys.admin}`,
  ]);
  if (chance(r, 0.2))
    return [
      ['x-api-key', keys.user],
      ['Authorization', bad],
    ];
  return [['Authorization', bad]];
}

/** A well-framed request: Content-Length or chunked as asked, Connection: close. */
function request(o: {
  method: string;
  path: string;
  headers: [string, string][];
  body?: Buffer;
  chunked?: boolean;
}): Buffer {
  let head = `${o.method} ${o.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n`;
  for (const [k, v] of o.headers) head += `${k}: ${v}\r\n`;
  if (o.body === undefined) return Buffer.from(`${head}\r\n`, 'latin1');
  if (o.chunked === true) {
    head += 'Transfer-Encoding: chunked\r\n\r\n';
    const parts: Buffer[] = [Buffer.from(head, 'latin1')];
    for (let i = 0; i < o.body.length; i += 64 * 1024) {
      const piece = o.body.subarray(i, i + 64 * 1024);
      parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    return Buffer.concat(parts);
  }
  head += `Content-Length: ${o.body.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), o.body]);
}

/** A request as a client of the API or the gateway could send it: framing right, the rest anything. */
function httpCase(r: Rng, t: FuzzTarget, api: boolean): FuzzCase {
  const p = path(r, t, api);
  const method = chance(r, 0.6)
    ? api
      ? pick(r, ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'])
      : pick(r, ['POST', 'GET'])
    : pick(r, methods);
  const headers = auth(r, t.keys);
  if (chance(r, 0.3))
    headers.push([
      'X-Request-Id',
      Buffer.from(oddString(r))
        .toString('latin1')
        .replace(/[\r\n\0]/g, ''),
    ]);
  if (chance(r, 0.2)) headers.push(['X-Session-Id', randomAscii(r, int(r, 0, 200))]);
  if (chance(r, 0.2))
    headers.push(['Accept', pick(r, ['text/event-stream', '*/*', 'application/json', randomAscii(r, 30)])]);
  let family = `${api ? 'api' : 'v1'} ${method}`;
  if (method === 'GET' || method === 'HEAD' || method === 'DELETE' || chance(r, 0.1)) {
    return {
      family,
      bytes: request({ method, path: p, headers }),
      api,
      garbage: false,
      head: method === 'HEAD',
    };
  }
  const b = body(r, t, p);
  family += ` ${b.family}`;
  headers.push([
    'Content-Type',
    pick(r, [
      'application/json',
      'application/json',
      'text/plain',
      'application/json; charset=latin1',
      'multipart/form-data; boundary=x',
      '',
    ]),
  ]);
  const chunked = chance(r, 0.2);
  if (chunked) family += ' chunked';
  return {
    family,
    bytes: request({ method, path: p, headers, body: b.text, chunked }),
    api,
    garbage: false,
    head: method === 'HEAD',
  };
}

/** Bytes that are not a well-formed request, in one of many ways. */
function garbageCase(r: Rng, t: FuzzTarget): FuzzCase {
  const api = chance(r, 0.5);
  const p = path(r, t, api);
  const key = `Authorization: Bearer ${t.keys.user}\r\n`;
  const k = int(r, 0, 19);
  const s = (family: string, text: string | Buffer): FuzzCase => ({
    family,
    bytes: typeof text === 'string' ? Buffer.from(text, 'latin1') : text,
    api,
    garbage: true,
    head: false,
  });
  const json = '{"model":"x"}';
  switch (k) {
    case 0:
      return s('random bytes', randomBytes(r, int(r, 1, 2000)));
    case 1:
      return s(
        'random bytes then a head',
        Buffer.concat([randomBytes(r, int(r, 1, 50)), Buffer.from(`GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`)]),
      );
    case 2:
      return s(
        'bad request line',
        `${pick(r, ['GET', 'get', 'G ET', '', ' GET', 'GET\t'])} ${pick(r, [p, '', '*', 'http://x' + p, p + ' x', '\u00ff'])} ${pick(r, ['HTTP/1.1', 'HTTP/2.0', 'HTTP/1.10', 'HTTP/0.9', 'HTTPS/1.1', '', 'HTTP/1.1 x'])}\r\nHost: x\r\n\r\n`,
      );
    case 3:
      return s('request line without CRLF', `GET ${p} HTTP/1.1\nHost: x\n\n`);
    case 4:
      return s(
        'a header without a colon',
        `GET ${p} HTTP/1.1\r\nHost: x\r\n${key}${randomAscii(r, int(r, 1, 40), 'abcXYZ -')}\r\n\r\n`,
      );
    case 5:
      return s('space before the colon', `GET ${p} HTTP/1.1\r\nHost : x\r\n${key}\r\n`);
    case 6:
      return s(
        'bad header name',
        `GET ${p} HTTP/1.1\r\nHost: x\r\n${pick(r, ['a b', '(x)', '\u00e9', '', '@'])}: v\r\n${key}\r\n`,
      );
    case 7:
      return s('obsolete line folding', `GET ${p} HTTP/1.1\r\nHost: x\r\n${key}X-A: a\r\n  folded\r\n\r\n`);
    case 8:
      return s(
        'huge header',
        `GET ${p} HTTP/1.1\r\nHost: x\r\n${key}X-Big: ${'b'.repeat(int(r, 17_000, 80_000))}\r\n\r\n`,
      );
    case 9:
      return s(
        'many headers',
        `GET ${p} HTTP/1.1\r\nHost: x\r\n${key}${Array.from({ length: int(r, 200, 2000) }, (_, i) => `X-${i}: ${i}\r\n`).join('')}\r\n`,
      );
    case 10:
      return s('huge URL', `GET ${p}?${'q'.repeat(int(r, 17_000, 70_000))} HTTP/1.1\r\nHost: x\r\n\r\n`);
    case 11:
      return s(
        'bad chunk size',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Transfer-Encoding: chunked\r\n\r\n${pick(r, ['zz', '-1', 'ffffffffffffffffff', ' 5', '5 5', '0x5', ''])}\r\n${json}\r\n0\r\n\r\n`,
      );
    case 12:
      return s(
        'chunk longer than its size',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Transfer-Encoding: chunked\r\n\r\n2\r\n${json}\r\n0\r\n\r\n`,
      );
    case 13:
      return s(
        'chunked cut short',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Transfer-Encoding: chunked\r\n\r\n${(json.length + 10).toString(16)}\r\n${json}`,
      );
    case 14:
      return s(
        'body shorter than Content-Length',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nContent-Length: ${json.length + int(r, 1, 100_000)}\r\n\r\n${json}`,
      );
    case 15:
      return s(
        'bad Content-Length',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Content-Length: ${pick(r, ['-1', 'abc', '1e3', '13, 14', '0x10', '99999999999999999999', '+13', ' '])}\r\n\r\n${json}`,
      );
    case 16:
      return s(
        'body longer than Content-Length',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nContent-Length: 3\r\n\r\n${json}${randomAscii(r, int(r, 1, 200))}`,
      );
    case 17:
      return s(
        'odd Transfer-Encoding',
        `POST ${p} HTTP/1.1\r\nHost: x\r\n${key}Transfer-Encoding: ${pick(r, ['gzip', 'chunked, chunked', 'identity', 'chunked, gzip', 'xchunked', 'chunked\r\nTransfer-Encoding: chunked'])}\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
      );
    case 18:
      return s(
        'control bytes in a header',
        `GET ${p} HTTP/1.1\r\nHost: x\r\n${key}X-A: a${pick(r, ['\u0000', '\u0001', '\u007f', '\r', '\u000b'])}b\r\n\r\n`,
      );
    default:
      return s(
        'two requests, the second broken',
        `GET ${p} HTTP/1.1\r\nHost: x\r\n${key}\r\n${randomAscii(r, int(r, 1, 100))}\r\n\r\n`,
      );
  }
}

/** The `i`th request of a run. */
export function fuzzCase(r: Rng, t: FuzzTarget): FuzzCase {
  const k = r();
  if (k < 0.3) return garbageCase(r, t);
  return httpCase(r, t, k < 0.65);
}
