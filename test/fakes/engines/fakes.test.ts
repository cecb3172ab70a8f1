import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { promisify } from 'node:util';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { engineFor } from '../../../src/engines/registry.js';
import type { EngineSettings, ShardLaunch } from '../../../src/engines/types.js';

import {
  fakeGguf,
  fakeLlamaServer,
  fakeSglang,
  fakeVllm,
  freePort,
  startFake,
  startFakeLlama,
  startFakeSglang,
  startFakeVllm,
  sseData,
  type RunningFake,
} from './fake-engines.js';

const run = promisify(execFile);
const KEY = 'secret';
const auth = { Authorization: `Bearer ${KEY}` };

/** Runs a fake to completion: its exit code and output. */
async function runToEnd(bin: string, args: string[], env: Record<string, string> = {}) {
  try {
    const r = await run(bin, args, { env: { ...process.env, ...env } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

async function get(url: string, headers: Record<string, string> = {}) {
  const r = await fetch(url, { headers });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

async function post(url: string, body: unknown, headers: Record<string, string> = auth) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

/** A request held open until the test lets go: resolves `closed` when the connection ends. */
function hold(url: string, body: unknown) {
  const u = new URL(url);
  let text = '';
  const req = request({
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...auth },
  });
  const closed = new Promise<{ text: string; complete: boolean }>((resolve) => {
    req.on('response', (res) => {
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        resolve({ text, complete: true });
      });
      res.on('error', () => {
        resolve({ text, complete: false });
      });
      res.on('aborted', () => {
        resolve({ text, complete: false });
      });
    });
    req.on('error', () => {
      resolve({ text, complete: false });
    });
  });
  req.end(JSON.stringify(body));
  return { closed, abort: () => req.destroy(), text: () => text };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A port another program (a plain TCP server here) listens on, on every interface. */
async function takenPort(): Promise<{ blocker: ReturnType<typeof createServer>; port: number }> {
  const blocker = createServer();
  const port = await new Promise<number>((resolve) =>
    blocker.listen(0, '0.0.0.0', () => {
      resolve((blocker.address() as { port: number }).port);
    }),
  );
  return { blocker, port };
}

describe('fake llama-server: the command line', () => {
  it('prints its version on stderr, and its devices on stdout', async () => {
    const v = await runToEnd(fakeLlamaServer, ['--version']);
    expect(v).toEqual({
      code: 0,
      stdout: '',
      stderr: 'version: 0.2.0-dev (build 10587, commit 3f545becc)\nbuilt with GNU 12.2.0 for Linux x86_64\n',
    });
    expect((await runToEnd(fakeLlamaServer, ['--list-devices'])).stdout).toBe(
      'Available devices:\n  (none)\n',
    );
    const gpus = await runToEnd(fakeLlamaServer, ['--list-devices'], {
      FAKE_LLAMA_DEVICES:
        'CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free);CUDA1: NVIDIA L4 (22994 MiB, 22713 MiB free)',
    });
    expect(gpus.stdout).toBe(
      'Available devices:\n  CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free)\n  CUDA1: NVIDIA L4 (22994 MiB, 22713 MiB free)\n',
    );
  });

  it('exits 1 on an unknown flag and on the two-argument --lora-scaled, as build 10587', async () => {
    expect(await runToEnd(fakeLlamaServer, ['-m', 'x.gguf', '--no-such-flag'])).toMatchObject({
      code: 1,
      stderr: 'error: invalid argument: --no-such-flag\n',
    });
    const lora = await runToEnd(fakeLlamaServer, ['-m', 'x.gguf', '--lora-scaled', 'a.gguf', '0']);
    expect(lora.code).toBe(1);
    expect(lora.stderr).toMatch(
      /^error while handling argument "--lora-scaled": lora-scaled format: FNAME:SCALE\n/,
    );
  });

  it('exits 1 on a missing model file, with the log lines of capture 91', async () => {
    const r = await runToEnd(fakeLlamaServer, ['-m', '/no/such-model.gguf', '--port', '0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "E gguf_init_from_file: failed to open GGUF file '/no/such-model.gguf' (No such file or directory)",
    );
    expect(r.stderr).toMatch(/E srv {2}llama_server: exiting due to model loading error\n$/);
  });

  it('exits 1 when its port is taken, with the lines of capture 92 in its order', async () => {
    const { blocker, port } = await takenPort();
    const r = await runToEnd(fakeLlamaServer, [
      '-m',
      fakeGguf(),
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ]);
    blocker.close();
    expect(r.code).toBe(1);
    // Capture 92 without its timestamps.
    expect(r.stderr.replace(/^\d+\.\d{2}\.\d{3}\.\d{3} /gm, '')).toBe(
      [
        'I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)',
        `E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: ${port}`,
        'I srv    operator(): operator(): cleaning up before exit...',
        'E srv  llama_server: exiting due to HTTP server error',
        '',
      ].join('\n'),
    );
  });
});

describe('fake llama-server: start-up', () => {
  it('answers 503 on every path while loading, then 200 on /health', async () => {
    const port = await freePort();
    const p = startFake(
      fakeLlamaServer,
      ['-m', fakeGguf(), '--host', '127.0.0.1', '--port', String(port), '--metrics'],
      { FAKE_LLAMA_LOAD_MS: '400', LLAMA_API_KEY: KEY },
    );
    try {
      let first: { status: number; text: string } | undefined;
      for (let i = 0; i < 100 && first === undefined; i++) {
        first = await get(`http://127.0.0.1:${port}/health`).catch(() => undefined);
        if (first === undefined) await sleep(10);
      }
      expect(first).toEqual(
        expect.objectContaining({
          status: 503,
          text: '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}',
        }),
      );
      expect((await get(`http://127.0.0.1:${port}/v1/models`, auth)).status).toBe(503);
      await p.waitFor(/listening on http:\/\/127\.0\.0\.1:\d+/);
      const ok = await get(`http://127.0.0.1:${port}/health`);
      expect(ok.status).toBe(200);
      expect(ok.text).toBe('{"status":"ok"}');
      expect(ok.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(p.output()).toMatch(
        /I srv {4}load_model: initializing, n_slots = 4, n_ctx_slot = 2048, kv_unified = 'true'/,
      );
    } finally {
      await p.stop();
    }
  });

  it('gives each slot its share of --ctx-size, as capture 80', async () => {
    const p = await startFakeLlama({ args: ['--ctx-size', '4096', '--parallel', '4'] });
    expect(p.output()).toContain("n_slots = 4, n_ctx_slot = 1024, kv_unified = 'false'");
    const slots = JSON.parse((await get(`${p.url}/slots`)).text) as { n_ctx: number }[];
    expect(slots.map((s) => s.n_ctx)).toEqual([1024, 1024, 1024, 1024]);
    expect((await p.stop()).code).toBe(0);
  });
});

describe('fake llama-server: serving', () => {
  let s: RunningFake;
  beforeAll(async () => {
    // A projector: the chat below carries an image.
    const files = ['--lora-scaled', `${fakeGguf('lora.gguf')}:0`, '--mmproj', fakeGguf('mmproj.gguf')];
    s = await startFakeLlama({
      args: ['--jinja', '--alias', 'tiny', '--parallel', '2', ...files],
      env: { LLAMA_API_KEY: KEY, FAKE_LLAMA_TOKEN_MS: '2' },
    });
  });
  afterAll(async () => {
    await s.stop();
  });

  it('asks no key on /health and /v1/health, and the key everywhere else, with the exact 401 body', async () => {
    expect(await get(`${s.url}/health`)).toMatchObject({ status: 200, text: '{"status":"ok"}' });
    expect(await get(`${s.url}/v1/health`, { Authorization: 'Bearer wrong' })).toMatchObject({
      status: 200,
      text: '{"status":"ok"}',
    });
    const unauthorized = '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}';
    for (const path of ['/metrics', '/v1/models', '/v1/does-not-exist', '/'])
      expect(await get(`${s.url}${path}`)).toMatchObject({ status: 401, text: unauthorized });
    expect(await get(`${s.url}/v1/models`, { Authorization: 'Bearer wrong' })).toMatchObject({
      status: 401,
      text: unauthorized,
    });
    expect((await get(`${s.url}/v1/models`, { 'X-Api-Key': KEY })).status).toBe(200);
  });

  it('lists the alias as the model, on /v1/models and /models', async () => {
    for (const path of ['/v1/models', '/models']) {
      const body = JSON.parse((await get(`${s.url}${path}`, auth)).text);
      expect(body.object).toBe('list');
      expect(body.data.map((m: { id: string }) => m.id)).toEqual(['tiny']);
      expect(body.models[0].name).toBe('tiny');
    }
  });

  it('answers a chat in the shape of capture 20, echoing what it received and the request id', async () => {
    const sent = {
      model: 'tiny',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          ],
        },
      ],
      max_tokens: 4,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      response_format: { type: 'json_object' },
      logprobs: true,
      my_extra_field: { kept: true },
    };
    const r = await post(`${s.url}/v1/chat/completions`, sent, { ...auth, 'X-Request-Id': 'req-123' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-request-id')).toBe('req-123');
    const body = JSON.parse(r.text);
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'tiny',
      system_fingerprint: 'b10587-3f545becc',
      choices: [
        { finish_reason: 'length', index: 0, message: { role: 'assistant', content: 'Hello from the fake' } },
      ],
      usage: { completion_tokens: 4 },
      x_fake: { model: 'tiny', lora: [], received: sent },
    });
    expect(body.id).toMatch(/^chatcmpl-[A-Za-z0-9]{32}$/);
    expect(Object.keys(body.timings)).toContain('predicted_per_second');
  });

  it('streams a chat as capture 21: role first, content, an empty finish delta, usage, [DONE]', async () => {
    const r = await post(`${s.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const events = sseData(r.text) as any[];
    expect(events).toHaveLength(7);
    expect(events[0].choices).toEqual([
      { finish_reason: null, index: 0, delta: { role: 'assistant', content: null } },
    ]);
    expect(events[0].x_fake.received.max_tokens).toBe(3);
    expect(events.slice(1, 4).map((e) => e.choices[0].delta)).toEqual([
      { content: 'Hello' },
      { content: ' from' },
      { content: ' the' },
    ]);
    expect(events[4].choices).toEqual([{ finish_reason: 'length', index: 0, delta: {} }]);
    expect(events[5]).toMatchObject({
      choices: [],
      usage: { completion_tokens: 3, total_tokens: 3 + Number(events[5].usage.prompt_tokens) },
    });
    expect(events[6]).toBe('[DONE]');
    for (const e of events.slice(0, 6))
      expect(e).toMatchObject({ object: 'chat.completion.chunk', model: 'tiny', id: events[0].id });
  });

  it('streams no usage chunk unless asked (capture 21b), and timings on the finish chunk', async () => {
    const events = sseData(
      (
        await post(`${s.url}/v1/chat/completions`, {
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 2,
          stream: true,
        })
      ).text,
    ) as any[];
    expect(events).toHaveLength(5);
    expect(events[3].choices[0].finish_reason).toBe('length');
    expect(events[3].timings.predicted_n).toBe(2);
    expect(events.some((e) => e !== '[DONE]' && 'usage' in e)).toBe(false);
  });

  it('answers completions, and streams them with usage on the last chunk (captures 22, 22b)', async () => {
    const one = JSON.parse(
      (await post(`${s.url}/v1/completions`, { prompt: 'hello world', max_tokens: 2 })).text,
    );
    expect(one).toMatchObject({
      object: 'text_completion',
      choices: [{ text: 'Hello from', index: 0, logprobs: null, finish_reason: 'length' }],
    });
    const events = sseData(
      (await post(`${s.url}/v1/completions`, { prompt: 'hello world', max_tokens: 2, stream: true })).text,
    ) as any[];
    expect(events.map((e) => (e === '[DONE]' ? e : e.choices[0].text))).toEqual([
      'Hello',
      ' from',
      '',
      '[DONE]',
    ]);
    expect(events[2]).toMatchObject({
      choices: [{ finish_reason: 'length' }],
      usage: { completion_tokens: 2 },
    });
  });

  it('loads --lora-scaled adapters at their scale and applies one per request by id', async () => {
    const adapters = JSON.parse((await get(`${s.url}/lora-adapters`, auth)).text);
    expect(adapters).toEqual([
      { id: 0, path: expect.stringMatching(/lora\.gguf$/), scale: 0, task_name: '', prompt_prefix: '' },
    ]);
    const chat = (lora: unknown) =>
      post(`${s.url}/v1/chat/completions`, {
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 1,
        lora,
      });
    expect(JSON.parse((await chat([{ id: 0, scale: 1 }])).text).x_fake.lora).toEqual([{ id: 0, scale: 1 }]);
    expect(JSON.parse((await chat(undefined)).text).x_fake.lora).toEqual([]);
    expect(JSON.parse((await chat([{ id: 7, scale: 1 }])).text).x_fake.lora).toEqual([]);
    expect(await chat({ id: 0, scale: 1 })).toMatchObject({
      status: 400,
      text: '{"error":{"code":400,"message":"Field \'lora\': Error: \'lora\' must be an array of objects with \'id\' and \'scale\' fields","type":"invalid_request_error"}}',
    });
    expect(await post(`${s.url}/lora-adapters`, [{ id: 0, scale: 0.5 }])).toMatchObject({
      status: 200,
      text: '{"success":true}',
    });
    expect(JSON.parse((await get(`${s.url}/lora-adapters`, auth)).text)[0].scale).toBe(0.5);
    expect(JSON.parse((await chat(undefined)).text).x_fake.lora).toEqual([{ id: 0, scale: 0.5 }]);
    await post(`${s.url}/lora-adapters`, [{ id: 0, scale: 0 }]);
  });

  it('answers errors as captures 23, 26, 26b and 27', async () => {
    const malformed = await post(`${s.url}/v1/chat/completions`, '{"messages": [ {"role": ');
    expect(malformed.status).toBe(500);
    expect(JSON.parse(malformed.text).error).toMatchObject({
      code: 500,
      type: 'server_error',
      message: expect.stringMatching(/^\[json\.exception\.parse_error\.101\] parse error at line 1/),
    });
    expect(await post(`${s.url}/v1/chat/completions`, { max_tokens: 8 })).toMatchObject({
      status: 400,
      text: '{"error":{"code":400,"message":"\'messages\' is required","type":"invalid_request_error"}}',
    });
    expect(await get(`${s.url}/v1/does-not-exist`, auth)).toMatchObject({
      status: 404,
      text: '{"error":{"message":"File Not Found","type":"not_found_error","code":404}}',
    });
    expect(await post(`${s.url}/v1/embeddings`, { input: 'x' })).toMatchObject({
      status: 501,
      text: '{"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}}',
    });
  });

  it('exposes the llamacpp: metrics, with requests beyond --parallel deferred', async () => {
    const body = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 150 };
    const held = [
      hold(`${s.url}/v1/chat/completions`, body),
      hold(`${s.url}/v1/chat/completions`, body),
      hold(`${s.url}/v1/chat/completions`, body),
    ];
    await sleep(100);
    const m = await get(`${s.url}/metrics`, auth);
    expect(m.headers.get('content-type')).toBe('text/plain; version=0.0.4');
    for (const name of [
      'prompt_tokens_total',
      'tokens_predicted_total',
      'n_decode_total',
      'requests_processing',
      'requests_deferred',
      'n_busy_slots_per_decode',
    ]) {
      expect(m.text).toContain(`# TYPE llamacpp:${name} `);
    }
    expect(m.text).toContain('\nllamacpp:requests_processing 2\n');
    expect(m.text).toContain('\nllamacpp:requests_deferred 1\n');
    const slots = JSON.parse((await get(`${s.url}/slots`, auth)).text) as { is_processing: boolean }[];
    expect(slots.map((x) => x.is_processing)).toEqual([true, true]);
    for (const h of held) expect((await h.closed).complete).toBe(true);
    const after = (await get(`${s.url}/metrics`, auth)).text;
    expect(after).toContain('\nllamacpp:requests_processing 0\n');
  });
});

describe('fake llama-server: stopping and failing', () => {
  it('exits 0 at once on SIGTERM when idle', async () => {
    const p = await startFakeLlama();
    expect(await p.stop()).toEqual({ code: 0, signal: null });
    expect(p.output()).toContain('cleaning up before exit...');
  });

  it('waits, with a non-streamed request in flight, until its client goes (capture 42 A)', async () => {
    const p = await startFakeLlama({ env: { FAKE_LLAMA_TOKEN_MS: '5' } });
    const h = hold(`${p.url}/v1/completions`, { prompt: 'hello', max_tokens: 2000 });
    await sleep(100);
    p.child.kill('SIGTERM');
    await sleep(400);
    expect(p.child.exitCode).toBeNull();
    h.abort();
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(h.text()).toBe('');
  });

  it('exits 1 at once on a second SIGTERM (capture 42 B)', async () => {
    const p = await startFakeLlama({ env: { FAKE_LLAMA_TOKEN_MS: '5' } });
    const h = hold(`${p.url}/v1/completions`, { prompt: 'hello', max_tokens: 2000 });
    await sleep(100);
    p.child.kill('SIGTERM');
    await sleep(100);
    expect(await p.stop()).toEqual({ code: 1, signal: null });
    expect(p.output()).toContain('Received second interrupt, terminating immediately.');
    expect((await h.closed).complete).toBe(false);
  });

  it('cuts a stream in flight without [DONE] and exits 0 (capture 41)', async () => {
    const p = await startFakeLlama({ env: { FAKE_LLAMA_TOKEN_MS: '5' } });
    const h = hold(`${p.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2000,
      stream: true,
    });
    await sleep(150);
    expect(await p.stop()).toEqual({ code: 0, signal: null });
    const { text, complete } = await h.closed;
    expect(complete).toBe(false);
    expect(text).toContain('data: {');
    expect(text).not.toContain('[DONE]');
  });

  it('crashes after FAKE_LLAMA_FAIL_AFTER_MS, and fails completions with FAKE_LLAMA_FAIL_STATUS', async () => {
    const p = await startFakeLlama({
      env: { FAKE_LLAMA_FAIL_AFTER_MS: '300', FAKE_LLAMA_FAIL_STATUS: '500' },
      args: [],
    });
    const r = await post(`${p.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] }, {});
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text).error.type).toBe('server_error');
    expect(await p.exited).toEqual({ code: 134, signal: null });
  });

  it('answers 501 on /metrics without --metrics (capture 32)', async () => {
    const port = await freePort();
    const p = startFake(fakeLlamaServer, ['-m', fakeGguf(), '--port', String(port)], {
      FAKE_LLAMA_LOAD_MS: '0',
    });
    await p.waitFor(/listening on/);
    expect(await get(`http://127.0.0.1:${port}/metrics`)).toMatchObject({
      status: 501,
      text: '{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`","type":"not_supported_error"}}',
    });
    await p.stop();
  });
});

describe('fake vllm', () => {
  it('refuses connections while loading, then answers /health with an empty 200', async () => {
    const port = await freePort();
    const p = startFake(fakeVllm, ['serve', '/models/qwen', '--host', '127.0.0.1', '--port', String(port)], {
      FAKE_VLLM_LOAD_MS: '300',
    });
    await sleep(100);
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
    await p.waitFor(/Application startup complete/);
    expect(await get(`http://127.0.0.1:${port}/health`)).toMatchObject({ status: 200, text: '' });
    expect(await p.stop()).toEqual({ code: 0, signal: null });
  });

  let s: RunningFake;
  beforeAll(async () => {
    s = await startFakeVllm({
      args: [
        '--served-model-name',
        'qwen',
        '--enable-lora',
        '--lora-modules',
        'sql=/adapters/sql',
        'chat=/adapters/chat',
        '--max-loras',
        '2',
      ],
      env: { VLLM_API_KEY: KEY, FAKE_VLLM_TOKEN_MS: '1' },
    });
  });
  afterAll(async () => {
    expect(await s.stop()).toEqual({ code: 0, signal: null });
  });

  it('guards /v1/* with the key, and leaves /health and /metrics open', async () => {
    expect(await get(`${s.url}/v1/models`)).toMatchObject({ status: 401, text: '{"error":"Unauthorized"}' });
    expect((await get(`${s.url}/health`)).status).toBe(200);
    const m = await get(`${s.url}/metrics`);
    for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc'])
      expect(m.text).toContain(`vllm:${name}{engine="0",model_name="qwen"} `);
  });

  it('lists the served model and each LoRA module under it', async () => {
    const body = JSON.parse((await get(`${s.url}/v1/models`, auth)).text);
    expect(body.data.map((m: any) => [m.id, m.parent])).toEqual([
      ['qwen', null],
      ['sql', 'qwen'],
      ['chat', 'qwen'],
    ]);
  });

  it('streams usage only when asked, and serves an adapter by its name', async () => {
    const plain = sseData(
      (
        await post(`${s.url}/v1/chat/completions`, {
          model: 'qwen',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 2,
          stream: true,
        })
      ).text,
    ) as any[];
    expect(plain.at(-1)).toBe('[DONE]');
    expect(plain.some((e) => e !== '[DONE]' && 'usage' in e)).toBe(false);
    const usage = sseData(
      (
        await post(`${s.url}/v1/chat/completions`, {
          model: 'sql',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 2,
          stream: true,
          stream_options: { include_usage: true },
        })
      ).text,
    ) as any[];
    expect(usage[0].x_fake).toMatchObject({ model: 'sql', lora: ['sql'] });
    expect(usage.at(-2)).toMatchObject({ choices: [], usage: { completion_tokens: 2 } });
    expect(await post(`${s.url}/v1/chat/completions`, { model: 'nope', messages: [] })).toMatchObject({
      status: 404,
    });
  });

  it('answers completions, embeddings and responses', async () => {
    expect(
      JSON.parse((await post(`${s.url}/v1/completions`, { model: 'qwen', prompt: 'x', max_tokens: 1 })).text)
        .choices[0].text,
    ).toBe('Hello');
    expect(
      JSON.parse((await post(`${s.url}/v1/embeddings`, { model: 'qwen', input: ['a', 'b'] })).text).data,
    ).toHaveLength(2);
    const resp = JSON.parse(
      (await post(`${s.url}/v1/responses`, { model: 'qwen', input: 'hi', max_output_tokens: 2 })).text,
    );
    expect(resp).toMatchObject({
      object: 'response',
      status: 'completed',
      output: [{ content: [{ text: 'Hello from' }] }],
    });
  });

  it("exits 1 at once when its port is taken, before loading, with the OSError of vLLM's early bind", async () => {
    const { blocker, port } = await takenPort();
    try {
      const r = await runToEnd(
        fakeVllm,
        ['serve', '/models/qwen', '--host', '127.0.0.1', '--port', String(port)],
        { FAKE_VLLM_LOAD_MS: '60000' },
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /\] non-default args: .*\nTraceback \(most recent call last\):\n[\s\S]*\n {4}sock\.bind\(addr\)\nOSError: \[Errno 98\] Address already in use\n$/,
      );
    } finally {
      blocker.close();
    }
  });

  it('runs a headless worker with no HTTP server until SIGTERM', async () => {
    const p = startFake(fakeVllm, [
      'serve',
      '/models/qwen',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--master-addr',
      '10.0.0.1',
      '--headless',
    ]);
    await p.waitFor(/headless worker, node rank 1 of 2/);
    expect(await p.stop()).toEqual({ code: 0, signal: null });
  });
});

describe('fake sglang', () => {
  it('takes the launch_server arguments, with metrics, key and adapters', async () => {
    const s = await startFakeSglang({
      args: [
        '--api-key',
        KEY,
        '--served-model-name',
        'qwen',
        '--enable-metrics',
        '--enable-lora',
        '--lora-paths',
        'sql=/adapters/sql',
      ],
    });
    try {
      expect(await get(`${s.url}/health`)).toMatchObject({ status: 200, text: '' });
      const m = (await get(`${s.url}/metrics`)).text;
      for (const name of ['num_running_reqs', 'num_queue_reqs', 'token_usage'])
        expect(m).toContain(`# TYPE sglang:${name} gauge`);
      expect(await get(`${s.url}/v1/models`)).toMatchObject({
        status: 401,
        text: '{"error":"Unauthorized"}',
      });
      const chat = JSON.parse(
        (
          await post(`${s.url}/v1/chat/completions`, {
            model: 'qwen:sql',
            messages: [{ role: 'user', content: 'hi' }],
            max_tokens: 2,
          })
        ).text,
      );
      expect(chat).toMatchObject({
        object: 'chat.completion',
        choices: [{ message: { content: 'Hello from' } }],
        x_fake: { lora: ['sql'] },
      });
    } finally {
      expect(await s.stop()).toEqual({ code: 0, signal: null });
    }
  });

  it("exits 1 when its port is taken once loaded, with uvicorn's bind error", async () => {
    const { blocker, port } = await takenPort();
    try {
      const r = await runToEnd(
        fakeSglang,
        ['-m', 'sglang.launch_server', '--model-path', '/m', '--host', '127.0.0.1', '--port', String(port)],
        { FAKE_SGLANG_LOAD_MS: '10' },
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(
          `Load weight end\\.\\nERROR: {4}\\[Errno 98\\] error while attempting to bind on address \\('127\\.0\\.0\\.1', ${port}\\): address already in use\\n$`,
        ),
      );
    } finally {
      blocker.close();
    }
  });

  it('has no /metrics without --enable-metrics, and no HTTP server on rank 1', async () => {
    const s = await startFakeSglang();
    expect((await get(`${s.url}/metrics`)).status).toBe(404);
    await s.stop();
    const w = startFake(fakeSglang, [
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/m',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--dist-init-addr',
      '10.0.0.1:50000',
    ]);
    await w.waitFor(/no HTTP server on this rank/);
    expect(await w.stop()).toEqual({ code: 0, signal: null });
  });
});

describe('the fakes run what llmgw launches', () => {
  // Each engine's runner chooses its executable: here the fake of it.
  const fakeBins: Readonly<Record<string, string>> = {
    llamacpp: fakeLlamaServer,
    vllm: fakeVllm,
    sglang: fakeSglang,
  };
  const settingsFor = (engine: string): EngineSettings => ({
    bin: fakeBins[engine] ?? engine,
    llamacpp: { parallel: 2, threads: 0 },
    cpuCount: 4,
  });
  const base = (port: number, engine: string): Omit<ShardLaunch, 'profile' | 'weights' | 'devices'> => ({
    replica: 'qwen-main-1',
    model: {
      name: 'qwen',
      source: 'hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF',
      context_length: 4096,
      replicas: 1,
      profiles: [],
    },
    rank: 0,
    ranks: 1,
    host: '127.0.0.1',
    port,
    apiKey: KEY,
    settings: settingsFor(engine),
  });
  const card = {
    id: 0,
    label: '0',
    class: 'l4-24g',
    card: 0,
    uuid: 'GPU-00000000-aaaa-bbbb-cccc-dddddddddddd',
  };
  const gpuProfile = (engine: 'vllm' | 'sglang') => ({
    name: 'main',
    engine,
    gpu_class: 'l4-24g',
    tp: 1,
    pp: 1,
    gpus_per_node: 1,
    nodes: 1,
    args: [],
    env: {},
    adapters: [{ name: 'sql', path: '/adapters/sql' }],
  });

  it('llama.cpp on CPU: the catalog name answers, and adapter 0 is applied by id', async () => {
    const model = fakeGguf('qwen2.5-0.5b-instruct-q4_k_m.gguf');
    const lora = fakeGguf('sql.gguf');
    const port = await freePort();
    const launch: ShardLaunch = {
      ...base(port, 'llamacpp'),
      profile: {
        name: 'cpu',
        engine: 'llamacpp',
        cpu: true,
        tp: 1,
        pp: 1,
        gpus_per_node: 0,
        nodes: 1,
        args: [],
        env: {},
        adapters: [{ name: 'sql', path: lora }],
      },
      devices: [],
      weights: { path: model },
    };
    const [spec] = engineFor('llamacpp').commands(launch);
    if (spec === undefined) throw new Error('no command');
    const p = startFake(spec.bin, spec.args, { ...spec.env, FAKE_LLAMA_LOAD_MS: '0' });
    try {
      await p.waitFor(/listening on/);
      expect(p.output()).toContain("n_slots = 2, n_ctx_slot = 4096, kv_unified = 'false'");
      const url = `http://127.0.0.1:${port}`;
      expect(JSON.parse((await get(`${url}/v1/models`, auth)).text).data[0].id).toBe('qwen');
      const body = JSON.parse(
        (
          await post(`${url}/v1/chat/completions`, {
            model: 'qwen',
            messages: [{ role: 'user', content: 'hi' }],
            max_tokens: 1,
            lora: [{ id: 0, scale: 1 }],
          })
        ).text,
      );
      expect(body.x_fake.lora).toEqual([{ id: 0, scale: 1 }]);
      expect(
        JSON.parse(
          (
            await post(`${url}/v1/chat/completions`, {
              model: 'qwen',
              messages: [{ role: 'user', content: 'hi' }],
              max_tokens: 1,
            })
          ).text,
        ).x_fake.lora,
      ).toEqual([]);
    } finally {
      expect(await p.stop()).toEqual({ code: 0, signal: null });
    }
  });

  for (const engine of ['vllm', 'sglang'] as const) {
    it(`${engine}: the served name and its adapter answer`, async () => {
      const port = await freePort();
      const [spec] = engineFor(engine).commands({
        ...base(port, engine),
        profile: gpuProfile(engine),
        devices: [card],
        weights: { path: '/models/qwen' },
      });
      if (spec === undefined) throw new Error('no command');
      const p = startFake(spec.bin, spec.args, {
        ...spec.env,
        [`FAKE_${engine.toUpperCase()}_LOAD_MS`]: '0',
      });
      try {
        await p.waitFor(engine === 'vllm' ? /Application startup complete/ : /ready to roll/);
        const url = `http://127.0.0.1:${port}`;
        const ids = JSON.parse((await get(`${url}/v1/models`, auth)).text).data.map(
          (m: { id: string }) => m.id,
        );
        expect(ids).toEqual(['qwen', 'sql']);
        const body = JSON.parse(
          (
            await post(`${url}/v1/chat/completions`, {
              model: 'sql',
              messages: [{ role: 'user', content: 'hi' }],
              max_tokens: 1,
            })
          ).text,
        );
        expect(body.x_fake.lora).toEqual(['sql']);
        expect((await get(`${url}/metrics`)).text).toContain(engineFor(engine).loadMetrics.running);
      } finally {
        expect(await p.stop()).toEqual({ code: 0, signal: null });
      }
    });
  }
});
