import { readFileSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startServerProcess, type ServerProcess } from './support/server-process.js';

/**
 * `llmgw server` with two gateway workers on TLS: they take the address and terminate TLS,
 * serve /v1 themselves, and relay the API, the console and the agents' WebSocket channel to
 * the control plane with the client's address.
 */
describe('llmgw server with gateway workers, on TLS', () => {
  let server: ServerProcess;
  let ca: string;
  let workers: number[];

  beforeAll(async () => {
    server = await startServerProcess({ config: 'tls: {enabled: true}\ngateway: {workers: 2}\n' });
    ca = readFileSync(join(server.dataDir, 'tls', 'ca.pem'), 'utf8');
    // Logged once the control plane's gateway is attached to them, just after it listens.
    let line: string | undefined;
    for (let i = 0; i < 100 && line === undefined; i++) {
      line = /^.*"msg":"gateway workers serving".*$/m.exec(server.output())?.[0];
      if (line === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    workers = (JSON.parse(line ?? '{}') as { workers?: number[] }).workers ?? [];
  });
  afterAll(async () => {
    await server.cleanup();
  });

  const get = (path: string, key?: string, agent?: HttpsAgent) =>
    new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
      const req = httpsRequest(
        `${server.url}${path}`,
        {
          ca,
          ...(agent === undefined ? {} : { agent }),
          headers: {
            ...(agent === undefined ? { connection: 'close' } : {}),
            ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
          },
        },
        (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });

  const post = (path: string, key: string, json: unknown) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest(
        `${server.url}${path}`,
        {
          ca,
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        },
        (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(json));
    });

  it('serves /v1 in a worker and relays the API and the console, over TLS', async () => {
    expect(server.url).toMatch(/^https:/);
    expect(workers).toHaveLength(2);
    const models = await get('/v1/models', server.adminKey);
    expect(models.status, models.body).toBe(200);
    expect(workers).toContain(Number(models.headers['x-llmgw-worker']));
    const me = await get('/api/v1/whoami', server.adminKey);
    expect(me.status).toBe(200);
    expect(me.headers['x-llmgw-worker']).toBeUndefined();
    expect(JSON.parse(me.body)).toMatchObject({ role: 'admin' });
    // The console's page (or, in a copy where it is not built, the page that says so), from the control plane.
    const page = await get('/');
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toMatch(/<title>llmgw|<h1>llmgw<\/h1>/);
    expect(page.headers['x-llmgw-worker']).toBeUndefined();
  });

  it('serves /v1 in a worker even on a connection that carried an API request first', async () => {
    const agent = new HttpsAgent({ keepAlive: true, maxSockets: 1, ca });
    const me = await get('/api/v1/whoami', server.adminKey, agent);
    expect(me.status).toBe(200);
    const models = await get('/v1/models', server.adminKey, agent);
    expect(models.status).toBe(200);
    expect(workers).toContain(Number(models.headers['x-llmgw-worker']));
    agent.destroy();
  });

  it('answers plain HTTP on its TLS address with the URL to use', async () => {
    const port = Number(new URL(server.url).port);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = netConnect(port, '127.0.0.1', () =>
        socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`),
      );
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toContain(`this address serves HTTPS only: use https://127.0.0.1:${port}/`);
  });

  /** The head of the answer to a WebSocket upgrade of the agents' channel, sent over TLS. */
  const upgrade = (headers: string[]) =>
    new Promise<string>((resolve, reject) => {
      const url = new URL(server.url);
      const socket = tlsConnect(
        { host: '127.0.0.1', port: Number(url.port), ca, servername: 'localhost' },
        () =>
          socket.write(
            [
              'GET /api/v1/agent/connect HTTP/1.1',
              `Host: ${url.host}`,
              'Upgrade: websocket',
              'Connection: Upgrade',
              'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
              'Sec-WebSocket-Version: 13',
              ...headers,
              '',
              '',
            ].join('\r\n'),
          ),
      );
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (text.includes('\r\n\r\n')) socket.destroy();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });

  it("relays the agents' WebSocket channel with the client's address", async () => {
    const created = await post('/api/v1/node-tokens', server.adminKey, {});
    const { secret } = JSON.parse(created.body) as { secret: string };
    const joined = await upgrade([
      `Authorization: Bearer ${secret}`,
      'x-llmgw-node-id: 0d6f3a52-node-0001',
      'x-llmgw-node-name: relayed',
    ]);
    expect(joined).toMatch(/^HTTP\/1\.1 101 Switching Protocols/);
    const refused = await upgrade([
      'Authorization: Bearer llmgw_node_forged',
      'x-llmgw-node-id: 0d6f3a52-node-0002',
    ]);
    expect(refused).toMatch(/^HTTP\/1\.1 401/);
    expect(refused).toContain("this node's credential is not valid here");
    // The control plane saw the client's address (through the worker's preamble), not its relay socket's.
    await expect
      .poll(() => /"address":"([^"]*)"[^\n]*"msg":"agent refused"/.exec(server.output())?.[1], {
        timeout: 5000,
      })
      .toBe('127.0.0.1');
  });

  it('takes its workers with it even when killed (SIGKILL): no process is left', async () => {
    await server.kill();
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await expect.poll(() => workers.filter(alive), { timeout: 5000 }).toEqual([]);
  });
});
