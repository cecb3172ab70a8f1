import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ApiClient } from './api-client.js';
import { checkCommand } from './lost-answer.js';

describe('checkCommand', () => {
  const audit = 'llmgw ctl audit --since 10m';
  it.each([
    ['POST', '/models', `llmgw ctl models, or ${audit}`],
    ['PATCH', '/models/qwen-7b', `llmgw ctl model show qwen-7b, or ${audit}`],
    ['POST', '/models/qwen-7b/scale', `llmgw ctl model show qwen-7b, or ${audit}`],
    ['DELETE', '/models/a%2Fb', `llmgw ctl model show a/b, or ${audit}`],
    ['POST', '/replicas/m-1/restart', `llmgw ctl replica show m-1, or ${audit}`],
    ['POST', '/keys', `llmgw ctl keys, or ${audit}`],
    ['DELETE', '/keys/ci', `llmgw ctl keys, or ${audit}`],
    ['PUT', '/config', `llmgw ctl config show, or ${audit}`],
    ['POST', '/node-tokens', `llmgw ctl node tokens, or ${audit}`],
    ['DELETE', '/nodes/gpu-1', `llmgw ctl nodes, or ${audit}`],
    ['POST', '/cache/m/pull?x=1', audit],
  ])('%s %s: %s', (method, path, want) => {
    expect(checkCommand(method, path)).toBe(want);
  });
});

/** A control plane that reads each request whole and then does `then` with its socket. */
async function listening(server: Server | HttpServer): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function afterRequest(then: (socket: Socket) => void): Server {
  return createServer((socket) => {
    let got = '';
    socket.on('error', () => undefined);
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(got)?.[1] ?? 0);
      if (got.length >= end + 4 + length) then(socket);
    });
  });
}

// Issue 25 item 8: a write whose answer was lost was reported as "cannot reach the control
// plane … is it running?" or undici's bare "terminated".
describe('ApiClient, when the answer of a request it sent is lost', () => {
  const servers: (Server | HttpServer)[] = [];
  let closes = '';
  let silent = '';
  let cuts = '';
  let refusesCut = '';
  let nobody = '';

  beforeAll(async () => {
    const start = async (s: Server | HttpServer) => {
      servers.push(s);
      return listening(s);
    };
    closes = await start(afterRequest((s) => s.destroy()));
    silent = await start(afterRequest(() => undefined));
    cuts = await start(
      createHttpServer((req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(req.method === 'GET' ? 200 : 201, {
            'content-type': 'application/json',
            'content-length': 100,
          });
          res.write('{"name":');
          setTimeout(() => res.socket?.destroy(), 50);
        });
      }),
    );
    refusesCut = await start(
      createHttpServer((req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(409, { 'content-type': 'application/json', 'content-length': 100 });
          res.write('{"error":');
          setTimeout(() => res.socket?.destroy(), 50);
        });
      }),
    );
    const gone = await start(createServer());
    nobody = gone;
    await new Promise<void>((resolve) => servers.pop()?.close(() => resolve()));
  });
  afterAll(async () => {
    for (const s of servers) await new Promise<void>((resolve) => s.close(() => resolve()));
  });

  const failure = async (server: string, method: string, path: string, timeoutMs = 30_000) => {
    const client = new ApiClient({ server, key: 'k', timeoutMs });
    try {
      await client.request(method, path, method === 'GET' ? {} : { json: { name: 'ci' } });
    } catch (e) {
      return { code: (e as { code: string }).code, message: (e as Error).message };
    }
    throw new Error('expected a failure');
  };

  it('says a write may have been made, and how to tell, when the connection closes after it was sent', async () => {
    expect(await failure(closes, 'POST', '/keys')).toEqual({
      code: 'unavailable',
      message: `the control plane at ${closes} took this change but its answer did not come (other side closed), so it may have been made or not: llmgw ctl keys, or llmgw ctl audit --since 10m shows whether it was; make it again only if it was not`,
    });
    expect((await failure(closes, 'DELETE', '/models/m')).message).toContain(
      'so it may have been made or not: llmgw ctl model show m, or llmgw ctl audit --since 10m shows whether it was',
    );
  });

  it('says so when no answer comes in time after the write was sent', async () => {
    expect(await failure(silent, 'PATCH', '/models/m', 300)).toEqual({
      code: 'unavailable',
      message: `the control plane at ${silent} took this change but its answer did not come (it did not answer in time), so it may have been made or not: llmgw ctl model show m, or llmgw ctl audit --since 10m shows whether it was; make it again only if it was not`,
    });
  });

  it('says a write was made when its status came and the rest was cut, and a refusal is a refusal', async () => {
    expect(await failure(cuts, 'POST', '/keys')).toEqual({
      code: 'unavailable',
      message: `the control plane at ${cuts} made this change (it answered 201) but the rest of its answer did not come (other side closed): llmgw ctl keys, or llmgw ctl audit --since 10m shows it`,
    });
    expect(await failure(refusesCut, 'POST', '/keys')).toEqual({
      code: 'invalid_argument',
      message: `the control plane at ${refusesCut} refused this (it answered 409), but the rest of its answer, which says why, did not come (other side closed)`,
    });
  });

  it('asks again for a read whose answer was lost', async () => {
    for (const server of [closes, cuts])
      expect(await failure(server, 'GET', '/models')).toEqual({
        code: 'unavailable',
        message: `no whole answer came from the control plane at ${server} (other side closed): ask again; if it keeps happening, its log says why`,
      });
  });

  it('keeps "cannot reach … is it running?" for a connection that was never made, write or read', async () => {
    for (const method of ['POST', 'GET'])
      expect(await failure(nobody, method, '/keys')).toEqual({
        code: 'unavailable',
        message: `cannot reach the control plane at ${nobody} (ECONNREFUSED): is it running? (llmgw up starts one on this machine; --server or LLMGW_SERVER points elsewhere)`,
      });
  });
});
