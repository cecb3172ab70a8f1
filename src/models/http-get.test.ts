import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { httpGet } from './http-get.js';

let servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  servers = [];
});

/** A server that answers each request with exactly these bytes (written in the pieces given), then closes or not. */
async function rawServer(
  pieces: (Buffer | string)[],
  opts: { close?: boolean; seen?: string[] } = {},
): Promise<URL> {
  const server = createServer((socket: Socket) => {
    socket.once('data', (req) => {
      opts.seen?.push(req.toString('latin1'));
      void (async () => {
        for (const p of pieces) {
          socket.write(p);
          await new Promise((r) => setTimeout(r, 5));
        }
        if (opts.close !== false) socket.end();
      })();
    });
    socket.on('error', () => undefined);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/a/b?x=1`);
}

async function body(url: URL): Promise<{ status: number; text: string }> {
  const a = await httpGet(url, { headers: {}, signal: new AbortController().signal });
  const parts: Buffer[] = [];
  await a.pump((c) => {
    parts.push(Buffer.from(c));
    return undefined;
  });
  return { status: a.status, text: Buffer.concat(parts).toString() };
}

describe('httpGet', () => {
  it('sends one GET with the headers given, and reads a body of known length in pieces', async () => {
    const seen: string[] = [];
    const url = await rawServer(
      ['HTTP/1.1 200 OK\r\ncontent-length: 11\r\nX-Thing: yes\r\n\r\nhel', 'lo wor', 'ld'],
      {
        seen,
        close: false,
      },
    );
    const a = await httpGet(url, { headers: { Range: 'bytes=0-' }, signal: new AbortController().signal });
    expect(a.header('x-thing')).toBe('yes');
    const parts: string[] = [];
    await a.pump((c) => {
      parts.push(Buffer.from(c).toString());
      return undefined;
    });
    expect(parts.join('')).toBe('hello world');
    expect(seen[0]).toBe(
      `GET /a/b?x=1 HTTP/1.1\r\nhost: ${url.host}\r\nrange: bytes=0-\r\nconnection: close\r\n\r\n`,
    );
  });

  it('reads chunked bodies (extensions and trailers dropped), close-delimited ones, and skips a 100 Continue', async () => {
    const chunked = await rawServer([
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n',
      '6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n',
    ]);
    expect(await body(chunked)).toEqual({ status: 200, text: 'hello world' });
    const closing = await rawServer(['HTTP/1.1 200 OK\r\n\r\nall of ', 'it']);
    expect(await body(closing)).toEqual({ status: 200, text: 'all of it' });
  });

  it('waits for the promise take returns before reading on, and for the last one before ending', async () => {
    const url = await rawServer(['HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nabc', 'def']);
    const a = await httpGet(url, { headers: {}, signal: new AbortController().signal });
    const order: string[] = [];
    await a.pump((c) => {
      order.push(`got ${Buffer.from(c).toString()}`);
      return new Promise((r) =>
        setTimeout(() => {
          order.push('written');
          r();
        }, 20),
      );
    });
    expect(order).toEqual(['got abc', 'written', 'got def', 'written']);
  });

  it('says when the connection ends before the body, or before any answer', async () => {
    const cut = await rawServer(['HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this']);
    await expect(body(cut)).rejects.toThrow('the connection closed before the body ended');
    const silent = await rawServer([]);
    await expect(body(silent)).rejects.toThrow(`${silent.host} closed the connection before answering`);
  });

  it('refuses what is not an HTTP/1.1 answer, and a head too long', async () => {
    const junk = await rawServer(['SSH-2.0-OpenSSH_9.6\r\n\r\n']);
    await expect(body(junk)).rejects.toThrow(`${junk.host} did not answer in HTTP/1.1`);
    const long = await rawServer([`HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(70 * 1024)}`], { close: false });
    await expect(body(long)).rejects.toThrow(`${long.host} sent a head longer than 65536 bytes`);
  });

  it('refuses a header value that would split the request', async () => {
    const url = await rawServer(['HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n']);
    await expect(
      httpGet(url, {
        headers: { authorization: 'Bearer x\r\nhost: evil' },
        signal: new AbortController().signal,
      }),
    ).rejects.toThrow(
      `cannot ask ${url.origin}: the value of header authorization holds a character HTTP does not allow there (U+000D)`,
    );
  });

  it('stops when the signal aborts, with its reason', async () => {
    const url = await rawServer(['HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nsome'], { close: false });
    const ac = new AbortController();
    const a = await httpGet(url, { headers: {}, signal: ac.signal });
    setTimeout(() => ac.abort(new Error('enough')), 30);
    await expect(a.pump(() => undefined)).rejects.toThrow('enough');
  });

  it('speaks TLS for https: a certificate it does not trust is refused at once, saying what to do', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-tls-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-days',
          '1',
          '-subj',
          '/CN=localhost',
          '-keyout',
          join(dir, 'key.pem'),
          '-out',
          join(dir, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
      const server = createTlsServer(
        { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) },
        (s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'),
      );
      servers.push(server);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const url = new URL(`https://localhost:${(server.address() as AddressInfo).port}/f`);
      await expect(body(url)).rejects.toThrow(
        `the certificate of ${url.host} is not trusted (self-signed certificate): if a proxy or a private mirror signs with its own authority, give Node its certificate with NODE_EXTRA_CA_CERTS`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
