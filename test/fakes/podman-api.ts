import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { frame } from '../../src/agent/shards/container/demux.js';

/**
 * A small in-process fake of Podman's libpod API (no Podman here), on a unix socket:
 * enough of `/v4.0.0/libpod/...` for the container supervisor — version, image exists and
 * pull (streamed text lines, as Podman writes them), container create, start, inspect,
 * wait, logs (multiplexed), stop, delete and list. A started "container" is an HTTP
 * server on its first port mapping answering /health, and one log line. Every request is
 * recorded, bodies parsed, so a test sees the paths and the JSON the client sent.
 */

export interface FakeRequest {
  method: string;
  url: string;
  body: unknown;
}

interface FakeContainer {
  id: string;
  spec: Record<string, unknown>;
  state: 'created' | 'running' | 'exited';
  exitCode: number;
  server?: http.Server;
  waiters: (() => void)[];
}

export interface FakePodman {
  host: string;
  requests: FakeRequest[];
  containers: Map<string, FakeContainer>;
  /** Ends a running container with `code`, as a crash inside it does. */
  kill: (id: string, code: number) => void;
  close: () => Promise<void>;
}

const prefix = '/v4.0.0/libpod';

export interface FakePodmanOptions {
  images?: string[];
  /** The `State.Pid` a running container reports (a host pid; default 4242). */
  pid?: number;
  /** The libpod API version its pings name (default 5.2.2). */
  apiVersion?: string;
}

export async function startFakePodman(options: FakePodmanOptions = {}): Promise<FakePodman> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-fake-podman-'));
  const socket = join(dir, 'podman.sock');
  const images = new Set(options.images ?? []);
  const requests: FakeRequest[] = [];
  const containers = new Map<string, FakeContainer>();
  const streams = new Set<http.ServerResponse>();

  const json = (res: http.ServerResponse, status: number, value: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };
  const exit = (c: FakeContainer, code: number): void => {
    if (c.state !== 'running') return;
    c.state = 'exited';
    c.exitCode = code;
    c.server?.close();
    for (const w of c.waiters.splice(0)) w();
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      const body: unknown = text === '' ? undefined : JSON.parse(text);
      const url = new URL(req.url ?? '/', 'http://podman');
      requests.push({ method: req.method ?? '', url: `${url.pathname}${url.search}`, body });
      const path = url.pathname;
      if (path === '/version') {
        const version = options.apiVersion ?? '5.2.2';
        json(res, 200, { Version: version, Components: [{ Name: 'Podman Engine', Version: version }] });
        return;
      }
      // Podman's Docker-compatible ping and info, which the agent's probe asks first.
      if (path === '/_ping' || path === '/libpod/_ping') {
        res
          .writeHead(200, {
            'content-type': 'text/plain',
            'libpod-api-version': options.apiVersion ?? '5.2.2',
          })
          .end('OK');
        return;
      }
      if (path === '/info') {
        json(res, 200, { Runtimes: { crun: { path: '/usr/bin/crun' } }, CDISpecDirs: ['/etc/cdi'] });
        return;
      }
      if (!path.startsWith(prefix)) {
        json(res, 404, { cause: 'no such path', message: `no such path ${path}`, response: 404 });
        return;
      }
      const rest = path.slice(prefix.length);
      let m: RegExpExecArray | null;
      if ((m = /^\/images\/(.+)\/exists$/.exec(rest)) !== null) {
        res.writeHead(images.has(m[1] ?? '') ? 204 : 404).end();
        return;
      }
      if (rest === '/images/pull' && req.method === 'POST') {
        const ref = url.searchParams.get('reference') ?? '';
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`${JSON.stringify({ stream: `Trying to pull ${ref}...\n` })}\n`);
        setTimeout(() => {
          res.write(`${JSON.stringify({ stream: 'Copying blob sha256:1f2e3d\n' })}\n`);
          images.add(ref);
          res.end(`${JSON.stringify({ images: ['sha256:abc'], id: 'sha256:abc' })}\n`);
        }, 200);
        return;
      }
      if (rest === '/containers/create' && req.method === 'POST') {
        const id = randomBytes(32).toString('hex');
        containers.set(id, {
          id,
          spec: body as Record<string, unknown>,
          state: 'created',
          exitCode: 0,
          waiters: [],
        });
        json(res, 201, { Id: id, Warnings: [] });
        return;
      }
      if (rest === '/containers/json') {
        const want =
          (JSON.parse(url.searchParams.get('filters') ?? '{}') as { label?: string[] }).label ?? [];
        const list = [...containers.values()]
          .filter((c) => {
            const labels = (c.spec['labels'] ?? {}) as Record<string, string>;
            return want.every((l) => {
              const [k = '', v] = l.split('=');
              return labels[k] === v;
            });
          })
          .map((c) => ({ Id: c.id, Labels: c.spec['labels'], State: c.state, Names: [c.spec['name']] }));
        json(res, 200, list);
        return;
      }
      if ((m = /^\/containers\/([0-9a-f]+)(\/[a-z]+)?$/.exec(rest)) !== null) {
        const c = containers.get(m[1] ?? '');
        if (c === undefined) {
          json(res, 404, { cause: 'no such container', message: 'no such container', response: 404 });
          return;
        }
        const verb = m[2] ?? '';
        if (verb === '' && req.method === 'DELETE') {
          exit(c, 137);
          containers.delete(c.id);
          json(res, 200, [{ Id: c.id }]);
        } else if (verb === '/start') {
          c.state = 'running';
          const port = ((c.spec['portmappings'] ?? []) as { host_port: number; host_ip: string }[])[0];
          c.server = http.createServer((_, r) => r.writeHead(200).end('{"status":"ok"}'));
          if (port !== undefined) c.server.listen(port.host_port, port.host_ip);
          res.writeHead(204).end();
        } else if (verb === '/json') {
          json(res, 200, {
            Id: c.id,
            State: { Running: c.state === 'running', Pid: options.pid ?? 4242, ExitCode: c.exitCode },
          });
        } else if (verb === '/wait') {
          if (c.state === 'exited') json(res, 200, c.exitCode);
          else c.waiters.push(() => json(res, 200, c.exitCode));
        } else if (verb === '/logs') {
          res.writeHead(200, { 'content-type': 'application/vnd.docker.multiplexed-stream' });
          res.write(frame(1, 'hello from the fake podman\n'));
          streams.add(res);
          c.waiters.push(() => {
            streams.delete(res);
            res.end();
          });
        } else if (verb === '/stop') {
          if (c.state !== 'running') res.writeHead(304).end();
          else {
            exit(c, 0);
            res.writeHead(204).end();
          }
        } else {
          json(res, 404, { message: `no such path ${path}` });
        }
        return;
      }
      json(res, 404, { message: `no such path ${path}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    host: `unix://${socket}`,
    requests,
    containers,
    kill: (id, code) => {
      const c = containers.get(id);
      if (c !== undefined) exit(c, code);
    },
    close: async () => {
      for (const c of containers.values()) exit(c, 0);
      for (const s of streams) s.end();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
