import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { dialAgentChannel } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { RawConnection } from './support/raw-http.js';

// Issue 25 item 8: an Upgrade request to anything but the agent channel got a bare 404 with
// no body. Errors are JSON, always: the answer says which path takes an upgrade.

const upgradeOf = (path: string, protocol: string, extra = '') =>
  `GET ${path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade${protocol === 'h2c' ? ', HTTP2-Settings' : ''}\r\nUpgrade: ${protocol}\r\n${extra}\r\n`;

describe('protocol upgrades to the control plane', () => {
  let t: TestControlPlane;
  let port: number;

  beforeAll(async () => {
    t = await startControlPlane();
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.stop();
  });

  it.each([
    ['a WebSocket to an API route', '/api/v1/models', 'websocket'],
    ['h2c (curl --http2 on http://) to the gateway', '/v1/models', 'h2c'],
    ['a WebSocket to a path nothing serves', '/nowhere?x=1', 'websocket'],
  ])('answers %s with a JSON 404 naming the agent channel, and closes', async (_name, path, protocol) => {
    const conn = await RawConnection.open('127.0.0.1', port);
    try {
      await conn.write([
        upgradeOf(path, protocol, protocol === 'h2c' ? 'HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n' : ''),
      ]);
      const a = await conn.answer();
      expect(a.status).toBe(404);
      expect(a.headers['content-type']).toBe('application/json');
      expect(JSON.parse(a.body).error).toMatchObject({
        code: 'not_found',
        message: `no protocol upgrade is served at ${path.split('?')[0]}: only /api/v1/agent/connect takes one; send other requests without the "Upgrade" and "Connection: upgrade" headers (curl adds them for --http2 on an http:// URL)`,
      });
      expect(await conn.closesWithin(3000)).toBe(true);
    } finally {
      conn.socket.destroy();
    }
  });

  it("answers a handshake the agent channel's WebSocket cannot take with a JSON 400 that says what it takes", async () => {
    const token = (await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string;
    const answer = await dialAgentChannel(t.url, {
      authorization: `Bearer ${token}`,
      'x-llmgw-node-id': 'node-id-0123456789',
      'x-llmgw-node-name': 'bad-handshake',
      'sec-websocket-version': '99',
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual({
      error: {
        code: 'invalid_argument',
        message:
          'the agent channel is a WebSocket (GET with "Upgrade: websocket", Sec-WebSocket-Key and Sec-WebSocket-Version 13): Missing or invalid Sec-WebSocket-Version header',
      },
    });
    // Nothing joined.
    expect(await t.cp.store.nodes.getByName('bad-handshake')).toBeUndefined();
  });
});
