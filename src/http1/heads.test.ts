import { describe, expect, it } from 'vitest';

import {
  mayBeHead,
  parseRequestHead,
  parseResponseHead,
  type RequestHead,
  type ResponseHead,
} from './heads.js';

/** A head as the front door hands it over: the lines joined by CRLF, without the blank line. */
const head = (...lines: string[]): string => lines.join('\r\n');

describe('parseRequestHead', () => {
  const accepted: [string, string, RequestHead][] = [
    [
      'a GET without headers',
      head('GET / HTTP/1.1', 'Host: h'),
      { method: 'GET', url: '/', headers: { host: 'h' }, contentLength: 0, close: false },
    ],
    [
      'a POST with its length, header names in lower case',
      head(
        'POST /v1/chat/completions HTTP/1.1',
        'Host: gw:8080',
        'Content-Type: application/json',
        'CONTENT-LENGTH: 42',
        'X-Request-ID: abc',
      ),
      {
        method: 'POST',
        url: '/v1/chat/completions',
        headers: {
          host: 'gw:8080',
          'content-type': 'application/json',
          'content-length': '42',
          'x-request-id': 'abc',
        },
        contentLength: 42,
        close: false,
      },
    ],
    [
      'a target with a query string kept as sent',
      head('GET /v1/models?limit=5&q=%20a HTTP/1.1', 'host: x'),
      {
        method: 'GET',
        url: '/v1/models?limit=5&q=%20a',
        headers: { host: 'x' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'a repeated header joined with ", " whatever its case',
      head('GET / HTTP/1.1', 'Host: h', 'Accept: text/html', 'ACCEPT: application/json', 'accept: */*'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', accept: 'text/html, application/json, */*' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'Content-Length: 0',
      head('POST /x HTTP/1.1', 'Host: h', 'Content-Length: 0'),
      {
        method: 'POST',
        url: '/x',
        headers: { host: 'h', 'content-length': '0' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'values trimmed of spaces and tabs around them, kept inside',
      head('GET / HTTP/1.1', 'Host: h', 'X-A:   spaced  out \t', 'X-B:\tx\ty', 'X-Empty:'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', 'x-a': 'spaced  out', 'x-b': 'x\ty', 'x-empty': '' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'every token character in a name',
      head('GET / HTTP/1.1', 'Host: h', "A1!#$%&'*+-.^_`|~z: v"),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', "a1!#$%&'*+-.^_`|~z": 'v' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'bytes past ASCII in a value (obs-text)',
      head('GET / HTTP/1.1', 'Host: h', 'X-Name: caf\u00e9'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', 'x-name': 'caf\u00e9' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'Connection: close',
      head('GET / HTTP/1.1', 'Host: h', 'Connection: close'),
      { method: 'GET', url: '/', headers: { host: 'h', connection: 'close' }, contentLength: 0, close: true },
    ],
    [
      'Connection: CLOSE in capitals',
      head('GET / HTTP/1.1', 'Host: h', 'connection: CLOSE'),
      { method: 'GET', url: '/', headers: { host: 'h', connection: 'CLOSE' }, contentLength: 0, close: true },
    ],
    [
      'close inside a Connection list',
      head('GET / HTTP/1.1', 'Host: h', 'Connection: keep-alive, Close'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', connection: 'keep-alive, Close' },
        contentLength: 0,
        close: true,
      },
    ],
    [
      'close in a second Connection header',
      head('GET / HTTP/1.1', 'Host: h', 'Connection: keep-alive', 'Connection: close'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', connection: 'keep-alive, close' },
        contentLength: 0,
        close: true,
      },
    ],
    [
      'Connection: keep-alive (not close)',
      head('GET / HTTP/1.1', 'Host: h', 'Connection: keep-alive'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', connection: 'keep-alive' },
        contentLength: 0,
        close: false,
      },
    ],
    [
      'a Connection token that only contains "close" (not close)',
      head('GET / HTTP/1.1', 'Host: h', 'Connection: closed, x-close-later'),
      {
        method: 'GET',
        url: '/',
        headers: { host: 'h', connection: 'closed, x-close-later' },
        contentLength: 0,
        close: false,
      },
    ],
  ];

  it.each(accepted)('accepts %s', (_name, text, expected) => {
    expect(parseRequestHead(text)).toEqual(expected);
  });

  const refused: [string, string][] = [
    ['an empty head', ''],
    ['a method alone', 'GET'],
    ['no target', 'GET HTTP/1.1\r\nHost: h'],
    ['HTTP/1.0', head('GET / HTTP/1.0', 'Host: a')],
    ['HTTP/1.11', 'GET / HTTP/1.11\r\nHost: h'],
    ['HTTP/2.0', 'GET / HTTP/2.0\r\nHost: h'],
    ['a lower-case version', 'GET / http/1.1\r\nHost: h'],
    ['a lower-case method', 'get / HTTP/1.1\r\nHost: h'],
    ['a mixed-case method', 'Post / HTTP/1.1\r\nHost: h'],
    ['a method with a digit', 'GET2 / HTTP/1.1\r\nHost: h'],
    ['a method longer than 16 letters', 'ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\nHost: h'],
    // node:http refuses FOO and reads PROPFIND itself: neither is the fast path's.
    ['a method node:http does not know', head('FOO / HTTP/1.1', 'Host: h')],
    ['a method the fast path leaves to node:http', head('PROPFIND / HTTP/1.1', 'Host: h')],
    ['no Host (HTTP/1.1 requires one)', head('GET / HTTP/1.1', 'Accept: */*')],
    [
      'the same Content-Length twice (node:http refuses it)',
      head('PUT /x HTTP/1.1', 'Host: h', 'Content-Length: 5', 'content-length: 5'),
    ],
    ['a byte past ASCII in the target', head('GET /caf\u00e9 HTTP/1.1', 'Host: h')],
    ['an absolute-form target', 'GET http://example.com/ HTTP/1.1\r\nHost: h'],
    ['an asterisk-form target', 'OPTIONS * HTTP/1.1\r\nHost: h'],
    ['an authority-form target', 'CONNECT example.com:443 HTTP/1.1\r\nHost: h'],
    ['a double space before the target', 'GET  / HTTP/1.1\r\nHost: h'],
    ['a double space before the version', 'GET /  HTTP/1.1\r\nHost: h'],
    ['a trailing space after the version', 'GET / HTTP/1.1 \r\nHost: h'],
    ['a space inside the target', 'GET /a b HTTP/1.1\r\nHost: h'],
    ['a tab inside the target', 'GET /a\tb HTTP/1.1\r\nHost: h'],
    ['a NUL inside the target', 'GET /a\u0000b HTTP/1.1\r\nHost: h'],
    ['a DEL inside the target', 'GET /a\u007fb HTTP/1.1\r\nHost: h'],
    ['an ESC inside the target', 'GET /a\u001bb HTTP/1.1\r\nHost: h'],
    ['a lone CR inside the target', 'GET /a\rb HTTP/1.1\r\nHost: h'],
    ['a request line ended by a lone LF', 'GET / HTTP/1.1\nHost: a'],
    ['a NUL in a value', head('GET / HTTP/1.1', 'Host: h', 'X: a\u0000b')],
    ['a DEL in a value', head('GET / HTTP/1.1', 'Host: h', 'X: a\u007f')],
    ['a vertical tab in a value', head('GET / HTTP/1.1', 'Host: h', 'X: a\u000bb')],
    ['a lone LF inside a value', head('GET / HTTP/1.1', 'Host: h', 'X: a\nInjected: b')],
    ['a lone CR inside a value', head('GET / HTTP/1.1', 'Host: h', 'X: a\rb')],
    ['a CR at the very end of the head', 'GET / HTTP/1.1\r\nHost: h\r\nX: a\r'],
    ['a folded continuation line (space)', head('GET / HTTP/1.1', 'Host: h', 'X: a', ' b')],
    ['a folded continuation line (tab)', head('GET / HTTP/1.1', 'Host: h', 'X: a', '\tb')],
    ['a header without a colon', head('GET / HTTP/1.1', 'Host: h', 'Referer example.com')],
    ['an empty header name', head('GET / HTTP/1.1', 'Host: h', ': value')],
    ['a space inside a name', head('GET / HTTP/1.1', 'Host: h', 'Ho st: a')],
    ['a space before the colon', head('GET / HTTP/1.1', 'Host: h', 'Accept : a')],
    ['a parenthesis in a name', head('GET / HTTP/1.1', 'Host: h', 'X(y): a')],
    ['a quote in a name', head('GET / HTTP/1.1', 'Host: h', 'X"y: a')],
    ['a slash in a name', head('GET / HTTP/1.1', 'Host: h', 'X/y: a')],
    ['a non-ASCII letter in a name', head('GET / HTTP/1.1', 'Host: h', 'X\u00e9: a')],
    ['an empty line inside the head', head('GET / HTTP/1.1', 'Host: a', '', 'X: b')],
    [
      'two different Content-Lengths',
      head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 5', 'Content-Length: 6'),
    ],
    ['two Content-Lengths in one header', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 5, 5')],
    ['a non-digit Content-Length', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: abc')],
    ['a negative Content-Length', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: -1')],
    ['a signed Content-Length', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: +5')],
    ['a hex Content-Length', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 0x10')],
    ['a fractional Content-Length', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 1.5')],
    ['an empty Content-Length', head('POST / HTTP/1.1', 'Host: h', 'Content-Length:')],
    ['a Content-Length of 16 digits', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 1234567890123456')],
    ['Transfer-Encoding: chunked', head('POST / HTTP/1.1', 'Host: h', 'Transfer-Encoding: chunked')],
    [
      'Transfer-Encoding with a Content-Length',
      head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 5', 'transfer-encoding: identity'),
    ],
    ['Expect: 100-continue', head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 5', 'Expect: 100-continue')],
    ['Upgrade', head('GET /ws HTTP/1.1', 'Host: h', 'Connection: Upgrade', 'Upgrade: websocket')],
  ];

  it.each(refused)('refuses %s', (_name, text) => {
    expect(parseRequestHead(text)).toBeUndefined();
  });

  it('accepts a 15-digit Content-Length, the longest it reads', () => {
    expect(
      parseRequestHead(head('POST / HTTP/1.1', 'Host: h', 'Content-Length: 123456789012345'))?.contentLength,
    ).toBe(123456789012345);
  });
});

describe('mayBeHead', () => {
  const cases: [string, string, boolean][] = [
    ['the start of a request line', 'POST /v1/chat', true],
    ['a request line and a header so far', 'POST /v1 HTTP/1.1\r\nHost: a\r\nX-A: b', true],
    ['a CR that is the last byte so far', 'GET / HTTP/1.1\r', true],
    ['a tab and bytes past ASCII in a value', 'GET / HTTP/1.1\r\nX: a\tcaf\u00e9', true],
    ['TLS (a ClientHello)', '\u0016\u0003\u0001\u0000\u00f5\u0001', false],
    ['a lower-case first letter', 'get / HTTP/1.1', false],
    ['an empty line first', '\r\nGET / HTTP/1.1', false],
    ['a bare LF', 'GET / HTTP/1.1\nHost: a', false],
    ['a CR not followed by LF', 'GET / HTTP/1.1\rHost: a', false],
    ['a NUL', 'GET /\u0000 HTTP/1.1', false],
    ['a DEL', 'GET / HTTP/1.1\r\nX: \u007f', false],
  ];
  it.each(cases)('%s', (_name, text, expected) => {
    expect(mayBeHead(Buffer.from(text, 'latin1'))).toBe(expected);
  });
});

describe('parseResponseHead', () => {
  const cases: [
    string,
    string,
    string,
    Omit<ResponseHead, 'headers'> & { headers?: Record<string, string> },
  ][] = [
    [
      'a Content-Length answer',
      head('HTTP/1.1 200 OK', 'Content-Type: application/json', 'Content-Length: 17'),
      'POST',
      {
        status: 200,
        headers: { 'content-type': 'application/json', 'content-length': '17' },
        framing: { kind: 'length', length: 17 },
        reusable: true,
      },
    ],
    [
      'a Content-Length of 0',
      head('HTTP/1.1 200 OK', 'Content-Length: 0'),
      'GET',
      { status: 200, framing: { kind: 'length', length: 0 }, reusable: true },
    ],
    [
      'a status line without a reason phrase',
      head('HTTP/1.1 404', 'content-length: 3'),
      'GET',
      { status: 404, framing: { kind: 'length', length: 3 }, reusable: true },
    ],
    [
      'a chunked answer',
      head('HTTP/1.1 200 OK', 'Transfer-Encoding: chunked'),
      'POST',
      {
        status: 200,
        headers: { 'transfer-encoding': 'chunked' },
        framing: { kind: 'chunked' },
        reusable: true,
      },
    ],
    [
      'chunked as the last of several codings',
      head('HTTP/1.1 200 OK', 'Transfer-Encoding: gzip, Chunked'),
      'POST',
      { status: 200, framing: { kind: 'chunked' }, reusable: true },
    ],
    [
      'chunked in a second Transfer-Encoding header',
      head('HTTP/1.1 200 OK', 'Transfer-Encoding: gzip', 'Transfer-Encoding: chunked'),
      'POST',
      {
        status: 200,
        headers: { 'transfer-encoding': 'gzip, chunked' },
        framing: { kind: 'chunked' },
        reusable: true,
      },
    ],
    [
      'chunked with a Content-Length (chunked wins)',
      head('HTTP/1.1 200 OK', 'Content-Length: 100', 'Transfer-Encoding: chunked'),
      'POST',
      { status: 200, framing: { kind: 'chunked' }, reusable: true },
    ],
    [
      'a Transfer-Encoding whose last coding is not chunked',
      head('HTTP/1.1 200 OK', 'Transfer-Encoding: chunked, gzip'),
      'POST',
      { status: 200, framing: { kind: 'close' }, reusable: false },
    ],
    [
      'a Transfer-Encoding without chunked',
      head('HTTP/1.1 200 OK', 'Transfer-Encoding: gzip', 'Content-Length: 5'),
      'POST',
      { status: 200, framing: { kind: 'close' }, reusable: false },
    ],
    [
      'no length at all',
      head('HTTP/1.1 200 OK', 'Content-Type: text/plain'),
      'GET',
      { status: 200, framing: { kind: 'close' }, reusable: false },
    ],
    [
      'a 204',
      head('HTTP/1.1 204 No Content', 'Content-Length: 10'),
      'DELETE',
      { status: 204, framing: { kind: 'none' }, reusable: true },
    ],
    [
      'a 304',
      head('HTTP/1.1 304 Not Modified', 'Transfer-Encoding: chunked'),
      'GET',
      { status: 304, framing: { kind: 'none' }, reusable: true },
    ],
    [
      'the answer to a HEAD',
      head('HTTP/1.1 200 OK', 'Content-Length: 1000'),
      'HEAD',
      { status: 200, framing: { kind: 'none' }, reusable: true },
    ],
    [
      'the answer to a HEAD without a length',
      head('HTTP/1.1 200 OK'),
      'HEAD',
      { status: 200, framing: { kind: 'none' }, reusable: true },
    ],
    [
      'an interim 100 Continue',
      'HTTP/1.1 100 Continue',
      'POST',
      { status: 100, framing: { kind: 'none' }, reusable: true },
    ],
    [
      'HTTP/1.0 without keep-alive',
      head('HTTP/1.0 200 OK', 'Content-Length: 2'),
      'GET',
      { status: 200, framing: { kind: 'length', length: 2 }, reusable: false },
    ],
    [
      'HTTP/1.0 with Connection: keep-alive',
      head('HTTP/1.0 200 OK', 'Content-Length: 2', 'Connection: Keep-Alive'),
      'GET',
      { status: 200, framing: { kind: 'length', length: 2 }, reusable: true },
    ],
    [
      'HTTP/1.1 with Connection: close',
      head('HTTP/1.1 200 OK', 'Content-Length: 2', 'Connection: close'),
      'GET',
      { status: 200, framing: { kind: 'length', length: 2 }, reusable: false },
    ],
    [
      'HTTP/1.1 with close in a Connection list',
      head('HTTP/1.1 200 OK', 'Transfer-Encoding: chunked', 'Connection: keep-alive, CLOSE'),
      'GET',
      { status: 200, framing: { kind: 'chunked' }, reusable: false },
    ],
    [
      'HTTP/1.1 with Connection: keep-alive',
      head(
        'HTTP/1.1 500 Internal Server Error',
        'Content-Length: 2',
        'Connection: keep-alive',
        'Keep-Alive: timeout=5',
      ),
      'POST',
      {
        status: 500,
        headers: { 'content-length': '2', connection: 'keep-alive', 'keep-alive': 'timeout=5' },
        framing: { kind: 'length', length: 2 },
        reusable: true,
      },
    ],
  ];

  it.each(cases)('reads %s', (_name, text, method, expected) => {
    const parsed = parseResponseHead(text, method);
    expect(parsed).toBeDefined();
    expect(parsed?.status).toBe(expected.status);
    expect(parsed?.framing).toEqual(expected.framing);
    expect(parsed?.reusable).toBe(expected.reusable);
    if (expected.headers !== undefined) expect(parsed?.headers).toEqual(expected.headers);
  });

  const malformed: [string, string][] = [
    ['an empty head', ''],
    ['a two-digit status', 'HTTP/1.1 20 OK'],
    ['a four-digit status', 'HTTP/1.1 2000 OK'],
    ['a status glued to its reason', 'HTTP/1.1 200OK'],
    ['a double space before the status', 'HTTP/1.1  200 OK'],
    ['HTTP/2', 'HTTP/2 200 OK'],
    ['HTTP/1.2', 'HTTP/1.2 200 OK'],
    ['a lower-case protocol', 'http/1.1 200 OK'],
    ['another protocol', 'ICY 200 OK'],
    ['a non-digit Content-Length', head('HTTP/1.1 200 OK', 'Content-Length: ten')],
    ['two different Content-Lengths', head('HTTP/1.1 200 OK', 'Content-Length: 1', 'Content-Length: 2')],
    ['a header without a colon', head('HTTP/1.1 200 OK', 'Content-Length 5')],
    ['a folded header', head('HTTP/1.1 200 OK', 'X-A: a', ' b', 'Content-Length: 0')],
    ['a lone LF in a value', head('HTTP/1.1 200 OK', 'X-A: a\nContent-Length: 0')],
  ];

  it.each(malformed)('refuses %s', (_name, text) => {
    expect(parseResponseHead(text, 'GET')).toBeUndefined();
  });
});

describe('optional whitespace', () => {
  it('is spaces and tabs only: a no-break space (0xA0) stays in the value', () => {
    expect(parseRequestHead('POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\xa0')).toBeUndefined();
    expect(parseRequestHead('POST /x HTTP/1.1\r\nHost: h\r\nX-A: \t v \t')?.headers['x-a']).toBe('v');
  });
});
