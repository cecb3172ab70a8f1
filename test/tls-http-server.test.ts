import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, type PeerCertificate } from 'node:tls';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';

import { nodeRequest, type ClientResponse, type GatewayRequest } from '../src/http1/client-io.js';
import { httpGet, trustCaForOrigin } from '../src/models/http-get.js';
import { HttpServer } from '../src/http1/http-server.js';
import { createCa, fingerprint, issueCertificate } from '../src/tls/certificates.js';

const ca = createCa();
const serving = (cn: string) => {
  const c = issueCertificate(ca, { commonName: cn, dnsNames: ['localhost'], ips: ['127.0.0.1'] });
  return { cert: c.cert + ca.cert, key: c.key };
};

function lane(req: GatewayRequest, res: ClientResponse): void {
  const text = JSON.stringify({ lane: 'fast', encrypted: true, path: req.url });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function get(
  url: string,
  o: { ca?: string } = {},
): Promise<{ status: number; body: string; peer: PeerCertificate }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca: o.ca ?? ca.cert, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          body,
          peer: (res.socket as unknown as { getPeerCertificate: () => PeerCertificate }).getPeerCertificate(),
        });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HttpServer over TLS', () => {
  let http: HttpServer;
  let url: string;
  const first = serving('first');
  const wss = new WebSocketServer({ noServer: true, clientTracking: true });

  beforeAll(async () => {
    http = new HttpServer({ tls: first, headMs: 500 });
    http.fastLane('/v1/', {
      maxBodyBytes: 1 << 20,
      handler: lane,
      fallback: (req, res) => lane(nodeRequest(req), res),
    });
    http.mount('/api/', (req: IncomingMessage, res) => {
      req.resume();
      const text = JSON.stringify({
        lane: 'node:http',
        encrypted: (req.socket as { encrypted?: boolean }).encrypted === true,
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(text);
    });
    http.onUpgrade('/ws', (req, socket, head) => {
      wss.handleUpgrade(req, socket, head, (ws) => ws.send('hello over tls'));
    });
    url = await http.listen('127.0.0.1:0');
  });
  afterAll(async () => {
    // Upgraded connections are the WebSocket server's to close (the agent hub closes its own).
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    await http.close(100);
  });

  it('reports an https URL', () => {
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(http.secure).toBe(true);
  });

  it('answers the fast lane and node:http over TLS, with the CA trusted', async () => {
    const fast = await get(`${url}/v1/models`);
    expect(fast.status).toBe(200);
    expect(JSON.parse(fast.body)).toMatchObject({ lane: 'fast', path: '/v1/models' });
    const api = await get(`${url}/api/v1/health`);
    expect(JSON.parse(api.body)).toEqual({ lane: 'node:http', encrypted: true });
  });

  it('negotiates http/1.1 by ALPN', async () => {
    const port = Number(new URL(url).port);
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: ca.cert, ALPNProtocols: ['h2', 'http/1.1'] });
    await new Promise((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    expect(socket.alpnProtocol).toBe('http/1.1');
    socket.destroy();
  });

  it('refuses a client that does not trust the CA', async () => {
    await expect(get(`${url}/api/v1/health`, { ca: createCa().cert })).rejects.toThrow(
      /self-signed certificate in certificate chain/,
    );
  });

  it('answers plain HTTP with a 400 that says to use https', async () => {
    const port = Number(new URL(url).port);
    const answer = await new Promise<string>((resolve, reject) => {
      const s = netConnect(port, '127.0.0.1', () =>
        s.write(`GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`),
      );
      let text = '';
      s.on('data', (c) => (text += c.toString('latin1')));
      s.on('close', () => resolve(text));
      s.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain(`this address serves HTTPS only: use https://127.0.0.1:${port}/`);
  });

  it('carries WebSocket upgrades (the agent channel) over TLS', async () => {
    const ws = new WebSocket(`${url.replace('https', 'wss')}/ws`, { ca: ca.cert });
    const message = await new Promise<string>((resolve, reject) => {
      ws.once('message', (data: Buffer) => resolve(data.toString()));
      ws.once('error', reject);
    });
    expect(message).toBe('hello over tls');
    ws.close();
  });

  it('swaps its certificate for new connections without a restart', async () => {
    const before = await get(`${url}/api/v1/health`);
    expect(before.peer.fingerprint256).toBe(fingerprint(first.cert));
    const next = serving('second');
    http.setCertificate(next);
    const after = await get(`${url}/api/v1/health`);
    expect(after.peer.fingerprint256).toBe(fingerprint(next.cert));
    expect(after.peer.subject.CN).toBe('second');
  });

  it("lets the agent's downloads (http-get) trust the cluster CA for the control plane's origin only", async () => {
    const signal = AbortSignal.timeout(5000);
    const target = new URL(`${url}/api/v1/mirror`);
    await expect(httpGet(target, { headers: {}, signal })).rejects.toThrow();
    trustCaForOrigin(url, ca.cert);
    const answer = await httpGet(target, { headers: {}, signal });
    expect(answer.status).toBe(200);
    await answer.drop();
  });

  it('a server without TLS refuses a certificate swap, saying why', () => {
    expect(() => new HttpServer().setCertificate(first)).toThrow(/started without TLS/);
  });
});
