import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { fakeLlamaServer, fakeVllm } from './fakes/engines/fake-engines.js';
import type { FakeHub } from './fakes/hub/hub.js';
import { llmgw, startDaemon, type Daemon } from './support/cli.js';
import { fakeNvidiaSmi } from './support/fake-gpu.js';
import { delayedEngine, enginePorts, replicas, until } from './support/fleet.js';
import { startTestHub } from './support/hub.js';
import { probe, probeCases } from './support/raw-http.js';
import { localModel } from './support/local-model.js';

/**
 * The gateway through the official OpenAI client, against `llmgw up` on a machine whose
 * eight A100s are a fake nvidia-smi, with fake engines (vLLM and llama.cpp) serving.
 */
describe('the OpenAI-compatible gateway of llmgw up', () => {
  let dir: string;
  let up: Daemon;
  let url: string;
  let env: Record<string, string>;
  let adminKey: string;
  let client: OpenAI;
  let hub: FakeHub;

  const key = async (name: string, flags: string[] = []) =>
    JSON.parse((await llmgw(['ctl', 'key', 'create', name, ...flags, '--json'], env)).stdout)
      .secret as string;
  const chat = (model: string, extra: Record<string, unknown> = {}) =>
    client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
      ...extra,
    } as never);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-gateway-'));
    localModel(dir);
    writeFileSync(join(dir, 'sql.gguf'), '');
    const vllm = delayedEngine(dir, fakeVllm, 'FAKE_VLLM_DELAY_MS');
    const llama = delayedEngine(dir, fakeLlamaServer, 'FAKE_LLAMA_DELAY_MS');
    const gpu = (name: string, engine: string, extra: { replicas?: number; profile?: string } = {}) =>
      `  - name: ${name}\n    source: ${engine === 'vllm' ? 'hf://org/repo' : join(dir, 'm.safetensors')}\n    replicas: ${extra.replicas ?? 1}\n    profiles:\n      - name: a100\n        engine: ${engine}\n        gpu_class: a100-80g\n${extra.profile ?? ''}`;
    const ports = await enginePorts();
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        'listen: 127.0.0.1:0',
        `placement: {ports: ${ports.first}-${ports.last}}`,
        'agent:',
        '  heartbeat_ms: 300',
        '  stop_grace_s: 2',
        '  engines:',
        `    llamacpp: {bin: ${llama}}`,
        `    vllm: {bin: ${vllm}}`,
        'gateway:',
        '  max_body_mb: 0.25',
        // One worker process serves /v1: the queue's bound is per worker (docs/gateway-workers.md).
        '  workers: 1',
        '  queue: {max_per_model: 1, timeout_s: 2}',
        'models:',
        gpu('chat', 'vllm', {
          replicas: 2,
          profile: `        adapters: [{name: sql, path: ${join(dir, 'sql.gguf')}}]\n`,
        }),
        gpu('twin', 'vllm', { replicas: 2 }),
        gpu('tiny', 'llamacpp', {
          profile: `        args: [--parallel, '1']\n        adapters: [{name: sql, path: ${join(dir, 'sql.gguf')}}]\n`,
        }),
        gpu('embed', 'llamacpp', { profile: `        args: [--embeddings]\n` }),
        // llama.cpp without --embeddings: its /v1/embeddings answers 501.
        gpu('plain', 'llamacpp', { profile: `        args: [--parallel, '4']\n` }),
        // Loads for ten minutes: its replica stays starting.
        gpu('loading', 'llamacpp', { profile: `        env: {FAKE_LLAMA_LOAD_MS: '600000'}\n` }),
        '  - name: nowhere',
        '    source: hf://org/repo',
        '    profiles: [{name: l4, engine: vllm, gpu_class: l4-24g}]',
        // Its weights are on no node: its replica fails.
        '  - name: broken',
        `    source: ${join(dir, 'missing.gguf')}`,
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true, min_memory_gb: 0.1}]',
      ].join('\n'),
    );
    env = { XDG_CONFIG_HOME: join(dir, 'xdg') };
    // hf://org/repo resolves against it.
    hub = await startTestHub();
    up = startDaemon(
      ['up', '-c', join(dir, 'config.yaml')],
      {
        ...env,
        HF_ENDPOINT: hub.url,
        LLMGW_DATA_DIR: join(dir, 'data'),
        LLMGW_NVML_LIBRARY: '/nonexistent',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
        FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550',
        FAKE_ENGINE_LOAD_MS: '0',
      },
      dir,
    );
    adminKey = (await up.waitFor(/shown only this once[^\n]*\n\n\s+(llmgw_key_\w+)/))[1]!;
    url = (await up.waitFor(/"url":"(http:\/\/[\d.:]+)"/))[1]!;
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: adminKey, maxRetries: 0 });
    for (const model of ['chat', 'twin', 'tiny', 'embed', 'plain']) {
      await until(
        `${model} ready`,
        async () => {
          const list = await replicas(env, model);
          return list.length > 0 && list.every((r) => r.state === 'ready' || r.state === 'degraded')
            ? true
            : undefined;
        },
        60_000,
      );
    }
    // The gateway refreshes its routes twice a second.
    await new Promise((r) => setTimeout(r, 800));
  }, 120_000);
  afterAll(async () => {
    await up.stop('SIGTERM');
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the served models and their adapters', async () => {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'chat',
        'chat:sql',
        'twin',
        'tiny',
        'tiny:sql',
        'embed',
        'plain',
        'loading',
        'nowhere',
        'broken',
      ]),
    );
  });

  it('answers chat completions, non-streamed, with the body reaching the engine as sent', async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'weather',
          description: 'the weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } } },
        },
      },
    ];
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is this?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
    ];
    const body = {
      model: 'chat',
      messages,
      tools,
      tool_choice: 'auto',
      response_format: { type: 'json_object' },
      logprobs: true,
      top_logprobs: 2,
      max_tokens: 4,
      x_engine_field: 42,
    };
    const r = (await client.chat.completions.create(body as never)) as unknown as {
      choices: { message: { content: string } }[];
      usage: { completion_tokens: number };
      x_fake: { received: Record<string, unknown> };
    };
    expect(r.choices[0]?.message.content).toBeTruthy();
    expect(r.usage.completion_tokens).toBeGreaterThan(0);
    expect(r.x_fake.received).toEqual(body);
  });

  it('streams chat completions chunk by chunk, and counts the usage of a stream it asked for', async () => {
    const before = JSON.parse((await llmgw(['ctl', 'usage', '--model', 'chat', '--json'], env)).stdout)
      .items as { completion_tokens: number }[];
    const stream = await client.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
      stream: true,
    });
    const chunks: unknown[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    // The client did not ask for usage: the chunk the gateway asked for is not passed on.
    expect(
      chunks.some(
        (c) =>
          (c as { usage?: unknown }).usage !== undefined &&
          (c as { choices: unknown[] }).choices.length === 0,
      ),
    ).toBe(false);
    expect(chunks.length).toBeGreaterThan(2);
    const sum = (items: { completion_tokens: number }[]) =>
      items.reduce((n, i) => n + i.completion_tokens, 0);
    await until('the stream counted', async () => {
      const after = JSON.parse((await llmgw(['ctl', 'usage', '--model', 'chat', '--json'], env)).stdout)
        .items as { completion_tokens: number }[];
      return sum(after) >= sum(before) + 5 ? true : undefined;
    });
    // Asked for, the usage chunk reaches the client.
    const asked = await client.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: unknown;
    for await (const chunk of asked) usage = chunk.usage ?? usage;
    expect(usage).toMatchObject({ completion_tokens: 3 });
  });

  it('passes chunks on as they come, not when the answer is done', async () => {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', prompt: 'count', max_tokens: 8, stream: true }),
    });
    const times: number[] = [];
    const start = performance.now();
    for await (const _chunk of res.body as AsyncIterable<Uint8Array>) times.push(performance.now() - start);
    // Eight tokens 5 ms apart at least: the first arrives well before the last.
    expect(times.length).toBeGreaterThan(3);
    expect((times.at(-1) ?? 0) - (times[0] ?? 0)).toBeGreaterThan(20);
  });

  it('serves completions streamed and not, and embeddings', async () => {
    const done = await client.completions.create({ model: 'tiny', prompt: 'hello', max_tokens: 3 });
    expect(done.choices[0]?.text).toBeTruthy();
    const stream = await client.completions.create({
      model: 'tiny',
      prompt: 'hello',
      max_tokens: 3,
      stream: true,
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.text ?? '';
    expect(text.length).toBeGreaterThan(0);
    const e = await client.embeddings.create({ model: 'embed', input: 'hello' });
    expect(e.data[0]?.embedding.length).toBeGreaterThan(0);
  });

  it('serves /v1/responses where the engine offers it (vLLM), and says what to use where not', async () => {
    const r = await client.responses.create({ model: 'chat', input: 'hi', max_output_tokens: 2 });
    expect(r.status).toBe('completed');
    expect(r.output_text).toBe('Hello from');
    const refused = await client.responses.create({ model: 'tiny', input: 'hi' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 404, code: 'not_found' });
    expect((refused as Error).message).toContain(
      'model tiny runs on llamacpp, which does not serve /v1/responses: use /v1/chat/completions',
    );
  });

  it('serves an adapter as MODEL:ADAPTER: llama.cpp by lora id, vLLM by name', async () => {
    const llama = (await chat('tiny:sql')) as unknown as {
      x_fake: { lora: { id: number; scale: number }[]; received: { model: string } };
    };
    expect(llama.x_fake.lora).toEqual([{ id: 0, scale: 1 }]);
    expect(llama.x_fake.received.model).toBe('tiny');
    const vllm = (await chat('chat:sql')) as unknown as { x_fake: { received: { model: string } } };
    expect(vllm.x_fake.received.model).toBe('sql');
    await expect(chat('tiny:nope')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('takes requests however they are framed: chunked, with Expect, pipelined', async () => {
    const body = JSON.stringify({
      model: 'chat',
      messages: [{ role: 'user', content: 'framing' }],
      max_tokens: 2,
    });
    const { hostname, port } = new URL(url);
    // A chunked body and Expect: 100-continue are left to node:http; the answer is the same.
    for (const expect100 of [false, true]) {
      const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: hostname,
            port,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: {
              authorization: `Bearer ${adminKey}`,
              'content-type': 'application/json',
              ...(expect100 ? { expect: '100-continue' } : {}),
            },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        const send = () => {
          req.write(body.slice(0, 20));
          req.end(body.slice(20));
        };
        if (expect100) req.on('continue', send);
        else send();
      });
      expect(answer.status).toBe(200);
      expect((JSON.parse(answer.text) as { x_fake: { received: unknown } }).x_fake.received).toEqual(
        JSON.parse(body),
      );
    }
    // Two requests in one write, the second asking to close: both answered, in order, then the close.
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        const one = (id: string, extra = '') =>
          `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${adminKey}\r\nContent-Type: application/json\r\nX-Request-Id: ${id}\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
        socket.write(one('pipelined-1') + one('pipelined-2', 'Connection: close\r\n'));
      });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (c: string) => (text += c));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    const statuses = raw.match(/HTTP\/1\.1 \d{3}/g);
    expect(statuses).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200']);
    expect(raw.indexOf('x-request-id: pipelined-1')).toBeGreaterThan(0);
    expect(raw.indexOf('x-request-id: pipelined-2')).toBeGreaterThan(
      raw.indexOf('x-request-id: pipelined-1'),
    );
  });

  // The probe's cases, each sent first on a connection (the front door reads it) and after an
  // /api request on the same connection (node:http does): one answer, one close behaviour.
  // A slow body is left out: llmgw up awaits a body 300 s (src/http1/http-server.test.ts has it).
  it('answers each malformed, oversized, slow or refused request the same whichever parser reads it', async () => {
    const { hostname, port } = new URL(url);
    const api = `GET /api/v1/health HTTP/1.1\r\nHost: t\r\n\r\n`;
    const cases = probeCases({ path: '/v1/chat/completions', key: adminKey }).filter(
      (c) => c.name !== 'a slow body',
    );
    const results = await Promise.all(
      cases.map(async (c) => {
        const o = { host: hostname, port: Number(port), c, closeWithinMs: 5000, next: api };
        const [first, after] = await Promise.all([probe(o), probe({ ...o, first: api })]);
        return { c, first, after };
      }),
    );
    for (const { c, first, after } of results) {
      expect(first, c.name).toEqual({
        status: c.status ?? first.status,
        code: c.code ?? first.code,
        closes: c.closes,
      });
      expect(after, c.name).toEqual(first);
    }
  }, 60_000);

  it('answers HEAD /v1/models as GET, with its head alone', async () => {
    const head = await fetch(`${url}/v1/models`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await head.text()).toBe('');
  });

  it('refuses with OpenAI-shaped errors and the right statuses', async () => {
    const anon = new OpenAI({
      baseURL: `${url}/v1`,
      apiKey: 'llmgw_key_wrongwrongwrongwrongwrong1',
      maxRetries: 0,
    });
    await expect(anon.models.list()).rejects.toMatchObject({
      status: 401,
      code: 'invalid_api_key',
      type: 'authentication_error',
    });
    const none = await fetch(`${url}/v1/models`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { message: string } }).error.message).toMatch(
      /^no API key: send your API key as "Authorization: Bearer KEY"/,
    );

    const limited = new OpenAI({
      baseURL: `${url}/v1`,
      apiKey: await key('only-tiny', ['--models', 'tiny']),
      maxRetries: 0,
    });
    const forbidden = await limited.chat.completions
      .create({ model: 'chat', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(forbidden).toMatchObject({ status: 403, code: 'model_not_allowed' });
    expect((forbidden as Error).message).toContain(
      'key "only-tiny" may not use model "chat" (it may use: tiny)',
    );
    expect((await limited.models.list()).data.map((m) => m.id)).toEqual(['tiny', 'tiny:sql']);

    const unknown = await chat('chatt').catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found' });
    expect((unknown as Error).message).toContain('model "chatt" does not exist; did you mean "chat"?');

    const bad = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: '{"model": "chat", ',
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_json');

    const big = await chat('chat', { messages: [{ role: 'user', content: 'x'.repeat(400_000) }] }).catch(
      (e: unknown) => e,
    );
    expect(big).toMatchObject({ status: 413, code: 'request_too_large' });

    const rpm = new OpenAI({
      baseURL: `${url}/v1`,
      apiKey: await key('slow-lane', ['--rpm', '2']),
      maxRetries: 0,
    });
    await rpm.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    await rpm.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    const limitedRes = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${(rpm as unknown as { apiKey: string }).apiKey}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(limitedRes.status).toBe(429);
    expect(Number(limitedRes.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await limitedRes.json()) as { error: { message: string } }).error.message).toContain(
      'key "slow-lane" made its 2 requests per minute',
    );

    const pending = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'nowhere', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(pending.status).toBe(503);
    expect(((await pending.json()) as { error: { message: string; code: string } }).error.code).toBe(
      'no_ready_replica',
    );
  });

  /** An OpenAI client that retries as it does by default (twice), counting the requests it makes. */
  const countingClient = (apiKey = adminKey) => {
    const counter = { calls: 0 };
    const c = new OpenAI({
      baseURL: `${url}/v1`,
      apiKey,
      maxRetries: 2,
      fetch: (input: string | URL | Request, init?: RequestInit) => {
        counter.calls++;
        return fetch(input, init);
      },
    });
    return { client: c, counter };
  };
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it("passes an engine's 4xx or 501 to the client at once, in OpenAI's shape with the engine's message", async () => {
    const { client: c, counter } = countingClient();
    const refused = await c.embeddings.create({ model: 'plain', input: 'hello' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 501, code: 501, type: 'not_supported_error' });
    expect((refused as Error).message).toContain(
      'This server does not support embeddings. Start it with `--embeddings`',
    );
    // Not tried on another replica, and not again by the client: the engine was not started for it.
    expect(counter.calls).toBe(1);
    const raw = await post('/v1/embeddings', { model: 'plain', input: 'x' });
    expect(raw.status).toBe(501);
    expect(raw.headers.get('x-should-retry')).toBe('false');
    expect(raw.headers.get('x-llmgw-replica')).toMatch(/^plain-/);
    expect(await raw.json()).toEqual({
      error: {
        message: 'This server does not support embeddings. Start it with `--embeddings`',
        type: 'not_supported_error',
        param: null,
        code: 501,
      },
    });
    // A 400 of the engine's own (its `lora` is a list) is the client's answer too.
    const lora = { model: 'plain', messages: [{ role: 'user', content: 'x' }], lora: {} };
    const bad = await post('/v1/chat/completions', lora);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^Field 'lora'/);
  });

  it('keeps serving chat on a model while another client hammers it with requests its engine refuses', async () => {
    const hammer = async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) {
        const r = await post('/v1/embeddings', { model: 'plain', input: `x${i}` });
        await r.text();
        statuses.push(r.status);
      }
      return statuses;
    };
    const chatter = async () => {
      let ok = 0;
      for (let i = 0; i < 10; i++) {
        const r = await post('/v1/chat/completions', {
          model: 'plain',
          messages: [{ role: 'user', content: `c${i}` }],
          max_tokens: 2,
        });
        await r.text();
        if (r.status === 200) ok++;
      }
      return ok;
    };
    const [h1, h2, c1, c2] = await Promise.all([hammer(), hammer(), chatter(), chatter()]);
    expect([...h1, ...h2].filter((st) => st !== 501)).toEqual([]);
    expect(c1 + c2).toBe(20);
    // The replica stays in rotation: its breaker never opened.
    const text = await (
      await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${adminKey}` } })
    ).text();
    expect(text).toMatch(
      /llmgw_gateway_replica_state\{replica="plain-[^"]+",model="plain",state="closed"\} 1/,
    );
    expect(text).toMatch(/llmgw_gateway_errors_total\{model="plain",key="admin",code="engine_refused"\} \d+/);
    expect(text).not.toMatch(/llmgw_gateway_retries_total\{model="plain"\} [1-9]/);
  });

  it('keeps /metrics and the log small and free of secrets, whatever model names and paths clients send', async () => {
    const metrics = async () =>
      (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${adminKey}` } })).text();
    const before = await metrics();
    const mark = up.output().length;
    const huge = 'm'.repeat(200_000);
    for (let i = 0; i < 10; i++) {
      const r = await post('/v1/chat/completions', {
        model: `${huge}${i}`,
        messages: [{ role: 'user', content: 'x' }],
      });
      expect(r.status).toBe(400);
      const text = await r.text();
      expect(text.length).toBeLessThan(1000);
      expect(JSON.parse(text).error).toEqual({
        message:
          'the model name is 200001 characters long: models and adapters are named by DNS labels of at most 63 characters (MODEL, or MODEL:ADAPTER); GET /v1/models lists them',
        type: 'invalid_request_error',
        param: 'model',
        code: 'invalid_request',
      });
    }
    // An adapter name is held to the same bound.
    const longAdapter = await post('/v1/chat/completions', { model: `chat:${'a'.repeat(64)}`, messages: [] });
    expect(longAdapter.status).toBe(400);
    const random = Array.from({ length: 100 }, (_, i) => `r${i}-${Math.random().toString(36).slice(2)}`);
    for (const model of random) {
      const r = await post('/v1/completions', { model, prompt: 'x' });
      expect(r.status).toBe(404);
      await r.text();
    }
    // A key sent as a model name, and in a path (the gateway's and the API's).
    const asModel = await post('/v1/chat/completions', { model: adminKey, messages: [] });
    expect(asModel.status).toBe(404);
    expect(
      (await fetch(`${url}/v1/${adminKey}`, { headers: { authorization: `Bearer ${adminKey}` } })).status,
    ).toBe(404);
    const apiPath = await fetch(`${url}/api/v1/${adminKey}`, {
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(apiPath.status).toBe(404);
    expect(await apiPath.text()).not.toContain(adminKey);
    await (
      await post(
        '/v1/chat/completions',
        { model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
        { 'x-request-id': 'probe-done' },
      )
    ).text();
    await up.waitFor(/"requestId":"probe-done"/, 10_000);

    const after = await metrics();
    expect(after).not.toContain('mmmmmmmm');
    for (const model of random) expect(after).not.toContain(model);
    expect(after).not.toContain(adminKey.slice(10));
    expect(after).toMatch(/llmgw_gateway_requests_total\{model="unknown",key="admin",status="404"\} \d+/);
    // Refused for its length before it was taken as a model name at all.
    expect(after).toMatch(/llmgw_gateway_requests_total\{model="-",key="admin",status="400"\} \d+/);
    // A few series for "unknown" at most, not one per name sent.
    expect(after.length - before.length).toBeLessThan(8 * 1024);
    const log = up.output().slice(mark);
    expect(log).not.toContain(adminKey.slice(10));
    expect(log).not.toContain('m'.repeat(1000));
    expect(log).toContain('llmgw_key_[redacted]');
    for (const line of log
      .split('\n')
      .filter((l) => l.includes('"msg":"gateway request"') || l.includes('"msg":"api request"')))
      expect(line.length).toBeLessThan(2048);
  });

  it('answers at once, without Retry-After, for a model none of whose replicas can come up; one that is starting keeps the wait', async () => {
    await until(
      'broken failed',
      async () => ((await replicas(env, 'broken')).some((r) => r.state === 'failed') ? true : undefined),
      30_000,
    );
    const { client: c, counter } = countingClient();
    const failed = await until('the gateway to see it', async () => {
      const e = (await chat('broken').catch((x: unknown) => x)) as {
        status?: number;
        headers?: Headers;
        message: string;
      };
      return e.status === 503 && e.headers?.get('retry-after') === null ? e : undefined;
    });
    expect(failed.message).toMatch(
      /^503 no replica of broken can serve: replica broken-\S+ failed: .*are not on node .*\(llmgw ctl replicas broken says more\)$/,
    );
    counter.calls = 0;
    await expect(
      c.chat.completions.create({ model: 'broken', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({ status: 503, code: 'no_ready_replica' });
    expect(counter.calls).toBe(1);

    // Waiting for room that does not exist is no better.
    const nowhere = await post('/v1/chat/completions', {
      model: 'nowhere',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(nowhere.status).toBe(503);
    expect(nowhere.headers.get('retry-after')).toBeNull();
    expect(nowhere.headers.get('x-should-retry')).toBe('false');
    expect(((await nowhere.json()) as { error: { message: string } }).error.message).toMatch(
      /^no replica of nowhere can serve: 1 replica waits for room: .*l4-24g.* \(llmgw ctl replicas nowhere says more\)$/,
    );

    // A replica on its way: the client is told to come back.
    expect((await replicas(env, 'loading')).map((r) => r.state)).toEqual(['starting']);
    const loading = await post('/v1/chat/completions', {
      model: 'loading',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(loading.status).toBe(503);
    expect(loading.headers.get('retry-after')).toBe('10');
    expect(((await loading.json()) as { error: { message: string } }).error.message).toBe(
      'no replica of loading is ready: llmgw ctl replicas loading says why',
    );
  });

  it('serves /metrics at its path only, to admin and metrics keys', async () => {
    const get = (path: string, key?: string) =>
      fetch(`${url}${path}`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
    const scraper = await key('prom', ['--role', 'metrics']);
    const user = await key('metrics-curious');
    const ok = await get('/metrics', scraper);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('llmgw_gateway_requests_total');
    expect((await get('/metrics?x=1', adminKey)).status).toBe(200);

    const denied = await get('/metrics', user);
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { error: unknown }).error).toEqual({
      message:
        'key "metrics-curious" has the user role; /metrics needs an admin key or a metrics key (llmgw ctl key create NAME --role metrics)',
      type: 'permission_error',
      param: null,
      code: 'permission_denied',
    });
    for (const path of ['/metricsXYZ', '/metrics/x', '/metrics.txt']) {
      const r = await get(path, adminKey);
      expect(r.status).toBe(404);
      expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
        `no route GET ${path}: metrics are at GET /metrics`,
      );
    }

    // The metrics key reads /metrics and nothing else.
    const v1 = await new OpenAI({ baseURL: `${url}/v1`, apiKey: scraper, maxRetries: 0 }).models
      .list()
      .catch((e: unknown) => e);
    expect(v1).toMatchObject({ status: 403, code: 'permission_denied' });
    expect((v1 as Error).message).toContain(
      'key "prom" has the metrics role, which reads /metrics only: use a user key for /v1',
    );
    const api = await get('/api/v1/models', scraper);
    expect(api.status).toBe(403);
    expect(((await api.json()) as { error: { message: string } }).error.message).toBe(
      'key "prom" has the metrics role, which reads /metrics only: use a user or admin key for the API',
    );
    expect(await (await get('/api/v1/whoami', scraper)).json()).toEqual({ name: 'prom', role: 'metrics' });
  });

  it('queues requests when every replica is full, and answers 503 with Retry-After past the bound', async () => {
    // tiny has one slot, the queue one place: the third of three at once is turned away.
    const r = await replicas(env, 'tiny');
    writeFileSync(join(dir, `delay-${new URL(r[0]?.endpoint ?? '').port}`), '700');
    await llmgw(['ctl', 'replica', 'restart', r[0]!.id, '--in-place'], env);
    await until(
      'tiny back',
      async () =>
        (await replicas(env, 'tiny')).find((x) => x.state === 'ready' || x.state === 'degraded')
          ? true
          : undefined,
      30_000,
    );
    await new Promise((res) => setTimeout(res, 800));
    const send = () =>
      fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', prompt: 'x', max_tokens: 1 }),
      });
    const results = await Promise.all([send(), send(), send()]);
    const statuses = results.map((x) => x.status).sort();
    expect(statuses).toEqual([200, 200, 503]);
    const refused = results.find((x) => x.status === 503)!;
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /1 requests? (is|are) already waiting/,
    );
  });

  it('sends more requests to a fast replica than to its slow twin (least load)', async () => {
    const twins = await replicas(env, 'twin');
    const [slow, fast] = twins;
    const slowPort = new URL(slow!.endpoint!).port;
    writeFileSync(join(dir, `delay-${slowPort}`), '400');
    await llmgw(['ctl', 'replica', 'restart', slow!.id, '--in-place'], env);
    const slowNow = await until(
      'the slow twin back',
      async () => (await replicas(env, 'twin')).find((x) => x.id !== fast!.id && x.state === 'ready'),
      30_000,
    );
    expect(new URL(slowNow.endpoint!).port).toBe(slowPort);
    await new Promise((res) => setTimeout(res, 800));
    const counts = new Map<string, number>();
    const worker = async () => {
      for (let i = 0; i < 10; i++) {
        const res = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${adminKey}`,
            'content-type': 'application/json',
            'x-session-id': `w-${i}-${Math.random()}`,
          },
          body: JSON.stringify({ model: 'twin', prompt: `p${i}`, max_tokens: 1 }),
        });
        await res.text();
        const id = res.headers.get('x-llmgw-replica') ?? '?';
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
    const toSlow = counts.get(slowNow.id) ?? 0;
    const toFast = counts.get(fast!.id) ?? 0;
    expect(toSlow + toFast).toBe(40);
    expect(toFast).toBeGreaterThan(toSlow * 2);
  });

  it('keeps answering when a replica dies mid-run: requests not yet streaming are retried elsewhere', async () => {
    const [victim] = await replicas(env, 'chat');
    const pid = victim!.shards[0]!.pid!;
    const send = (i: number) =>
      client.completions.create({ model: 'chat', prompt: `r${i}`, max_tokens: 2 }).then(
        () => 'ok',
        (e: unknown) => `error ${(e as { status?: number }).status ?? '?'}`,
      );
    const first = Array.from({ length: 10 }, (_, i) => send(i));
    await new Promise((res) => setTimeout(res, 20));
    process.kill(pid, 'SIGKILL');
    const rest = Array.from({ length: 20 }, (_, i) => send(100 + i));
    const outcomes = await Promise.all([...first, ...rest]);
    expect(outcomes.filter((o) => o !== 'ok')).toEqual([]);
  });

  it('cancels the engine request when the client goes away', async () => {
    const abort = new AbortController();
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      signal: abort.signal,
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'twin', prompt: 'long', max_tokens: 2000, stream: true }),
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    const replica = res.headers.get('x-llmgw-replica')!;
    abort.abort();
    const metric = async () => {
      const text = await (
        await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${adminKey}` } })
      ).text();
      const line = text
        .split('\n')
        .find(
          (l) =>
            l.startsWith('llmgw_gateway_replica_load{') &&
            l.includes(`replica="${replica}"`) &&
            l.includes('kind="running"'),
        );
      return line === undefined ? undefined : Number(line.split(' ').at(-1));
    };
    await until(
      'the engine no longer computing it',
      async () => ((await metric()) === 0 ? true : undefined),
      10_000,
    );
  });

  it('passes X-Request-Id on and back, logs each request, and exposes its metrics', async () => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${adminKey}`,
        'content-type': 'application/json',
        'x-request-id': 'trace-abc-123',
      },
      body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }),
    });
    expect(res.headers.get('x-request-id')).toBe('trace-abc-123');
    // A refusal of its own, so the error counter below does not hang on an earlier test's.
    const refused = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'nowhere', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(refused.status).toBe(503);
    await up.waitFor(
      /"requestId":"trace-abc-123".*"model":"chat".*"status":200.*"msg":"gateway request"/,
      10_000,
    );
    const text = await (
      await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${adminKey}` } })
    ).text();
    expect(text).toMatch(/llmgw_gateway_requests_total\{model="chat",key="admin",status="200"\} \d+/);
    expect(text).toMatch(/llmgw_gateway_time_to_first_token_seconds_bucket\{le="[\d.]+",model="chat"\}/);
    expect(text).toMatch(/llmgw_gateway_inter_token_latency_seconds_count\{model="chat"\} \d+/);
    expect(text).toMatch(/llmgw_gateway_tokens_total\{model="chat",key="admin",kind="completion"\} \d+/);
    expect(text).toMatch(
      /llmgw_gateway_errors_total\{model="nowhere",key="admin",code="no_ready_replica"\} \d+/,
    );
    expect((await fetch(`${url}/metrics`)).status).toBe(401);
  });

  it('reports usage per key, model and hour', async () => {
    // A request of its own: usage is written within a second or so of its answer.
    await chat('chat');
    const r = await until('the admin key’s usage of chat written', async () => {
      const got = await llmgw(['ctl', 'usage', '--key-name', 'admin', '--since', '1h'], env);
      return /admin\s+chat\s+\d+/.test(got.stdout) ? got : undefined;
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^HOUR\s+KEY\s+MODEL\s+REQUESTS\s+PROMPT TOKENS\s+COMPLETION TOKENS/);
    expect(r.stdout).toMatch(/admin\s+chat\s+\d+\s+\d+\s+\d+/);
    expect(r.stdout).toMatch(/total: \d+ requests/);
  });

  describe('a gateway of its own', () => {
    let gw: Daemon;
    let gwUrl: string;
    beforeAll(async () => {
      const gwKey = await key('edge', ['--role', 'gateway']);
      gw = startDaemon(['gateway', '--server', url, '--key', gwKey, '--listen', '127.0.0.1:0'], {
        LLMGW_DATA_DIR: join(dir, 'gw'),
      });
      gwUrl = (await gw.waitFor(/"url":"(http:\/\/[\d.:]+)".*gateway listening/))[1]!;
      await new Promise((res) => setTimeout(res, 800));
    });
    afterAll(async () => {
      await gw.stop('SIGTERM');
    });

    it('follows the control plane’s routes, checks keys there, and writes usage there', async () => {
      const user = await key('edge-user');
      const c = new OpenAI({ baseURL: `${gwUrl}/v1`, apiKey: user, maxRetries: 0 });
      const r = await c.chat.completions.create({
        model: 'chat',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 2,
      });
      expect(r.choices[0]?.message.content).toBeTruthy();
      await expect(
        new OpenAI({
          baseURL: `${gwUrl}/v1`,
          apiKey: 'llmgw_key_nopenopenopenopenopenope',
          maxRetries: 0,
        }).models.list(),
      ).rejects.toMatchObject({ status: 401 });
      await until('usage written through the control plane', async () =>
        (await llmgw(['ctl', 'usage', '--key-name', 'edge-user'], env)).stdout.includes('edge-user')
          ? true
          : undefined,
      );
    });

    it('refuses to start with a key that is not a gateway key', async () => {
      const r = await llmgw([
        'gateway',
        '--server',
        url,
        '--key',
        await key('plain-user'),
        '--listen',
        '127.0.0.1:0',
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('key "plain-user" has the user role; a gateway needs one of role gateway');
    });
  });
});

describe('a gateway of its own when the control plane is away', () => {
  it('keeps serving the routes and keys it knows', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-gw-alone-'));
    const adminKey = 'alone-admin-key-0123456789abcdefghij';
    const { freePort } = await import('./fakes/engines/fake-engines.js');
    const port = await freePort();
    const p = await enginePorts();
    writeFileSync(
      join(dir, 'config.yaml'),
      `listen: 127.0.0.1:${port}\nagent:\n  heartbeat_ms: 300\n  engines:\n    vllm: {bin: ${fakeVllm}}\nplacement:\n  ports: ${p.first}-${p.last}\n`,
    );
    const hub = await startTestHub();
    const cpEnv = { LLMGW_ADMIN_KEY: adminKey, LLMGW_DATA_DIR: join(dir, 'cp'), HF_ENDPOINT: hub.url };
    let server = startDaemon(['server', '-c', join(dir, 'config.yaml')], cpEnv);
    await server.waitFor(/control plane listening/);
    const env = {
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      LLMGW_SERVER: `http://127.0.0.1:${port}`,
      LLMGW_KEY: adminKey,
    };
    const token = JSON.parse((await llmgw(['ctl', 'node', 'token', '--json'], env)).stdout).secret as string;
    const agent = startDaemon(
      ['agent', '--server', `http://127.0.0.1:${port}`, '--token', token, '--name', 'gpu'],
      {
        LLMGW_DATA_DIR: join(dir, 'node'),
        LLMGW_NVML_LIBRARY: '/nonexistent',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
        FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550',
        FAKE_ENGINE_LOAD_MS: '0',
      },
    );
    let gw: Daemon | undefined;
    try {
      await agent.waitFor(/joined the cluster/);
      await llmgw(
        ['ctl', 'model', 'add', '-f', '-'],
        env,
        JSON.stringify({
          name: 'm',
          source: 'hf://org/repo',
          profiles: [{ name: 'a100', engine: 'vllm', gpu_class: 'a100-80g' }],
        }),
      );
      await until('m ready', async () =>
        (await replicas(env, 'm')).find((r) => r.state === 'ready' || r.state === 'degraded')
          ? true
          : undefined,
      );
      const gwKey = JSON.parse(
        (await llmgw(['ctl', 'key', 'create', 'edge', '--role', 'gateway', '--json'], env)).stdout,
      ).secret as string;
      const userKey = JSON.parse((await llmgw(['ctl', 'key', 'create', 'client', '--json'], env)).stdout)
        .secret as string;
      gw = startDaemon(
        ['gateway', '--server', `http://127.0.0.1:${port}`, '--key', gwKey, '--listen', '127.0.0.1:0'],
        {},
      );
      const gwUrl = (await gw.waitFor(/"url":"(http:\/\/[\d.:]+)".*gateway listening/))[1]!;
      const c = new OpenAI({ baseURL: `${gwUrl}/v1`, apiKey: userKey, maxRetries: 0 });
      await until('routes followed', async () =>
        (await c.completions.create({ model: 'm', prompt: 'x', max_tokens: 1 }).catch(() => undefined)) ===
        undefined
          ? undefined
          : true,
      );

      expect(await server.stop('SIGTERM')).toBe(0);
      for (let i = 0; i < 3; i++)
        expect(
          (await c.completions.create({ model: 'm', prompt: `alone ${i}`, max_tokens: 1 })).choices[0]?.text,
        ).toBeDefined();
      await gw.waitFor(/routes not refreshed; serving with the last ones/, 10_000);

      // Back again: the usage counted while it was away reaches the store.
      server = startDaemon(['server', '-c', join(dir, 'config.yaml')], cpEnv);
      await server.waitFor(/control plane listening/);
      await until('usage written after the control plane returned', async () => {
        const rows = JSON.parse((await llmgw(['ctl', 'usage', '--key-name', 'client', '--json'], env)).stdout)
          .items as { requests: number }[];
        return rows.reduce((n, r) => n + r.requests, 0) >= 4 ? true : undefined;
      });
    } finally {
      await gw?.stop('SIGTERM');
      await agent.stop('SIGTERM');
      await server.stop('SIGTERM');
      await hub.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
