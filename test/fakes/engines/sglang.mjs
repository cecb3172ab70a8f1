#!/usr/bin/env node
// A fake SGLang server, taking what llmgw passes to `python3 -m sglang.launch_server`:
// point settings.sglang.bin at this file and it receives `-m sglang.launch_server
// --model-path MODEL ...` (the leading `-m sglang.launch_server` is accepted and ignored;
// `serve` is too, for the newer `sglang serve` form).
// - Nothing listens until FAKE_SGLANG_LOAD_MS (default 200): connections are refused.
// - Its port is bound by uvicorn once the model is loaded: a port in use then ends it with
//   uvicorn's `ERROR:    [Errno 98] error while attempting to bind on address ('HOST', PORT):
//   address already in use`, exit 1.
// - /health and /health_generate answer 200 with an empty body; /metrics exists only with
//   --enable-metrics (sglang: gauges). Neither needs the key.
// - --api-key guards every other path: 401 {"error":"Unauthorized"}.
// - --lora-paths name=path ... are adapters: a request picks one by "model": "NAME",
//   "model": "SERVED:NAME", or "lora_path": "NAME".
// - --node-rank > 0 (a worker of a multi-node replica) serves nothing and waits for SIGTERM.
// - SIGTERM: exit 0, cutting whatever is in flight.
// Knobs as the llama fake, prefixed FAKE_SGLANG_ (or FAKE_ENGINE_): LOAD_MS, DELAY_MS, TOKEN_MS,
// TOKENS, FAIL_STATUS, FAIL_AFTER_MS, FAIL_CODE. Answers carry "x_fake": {model, lora, received}.
import http from 'node:http';
import { setTimeout } from 'node:timers';
import { URL } from 'node:url';

import {
  InFlight,
  Slots,
  crashLater,
  exitOnSignals,
  idleWorker,
  echoRequestId,
  embeddingsBody,
  fakeSettings,
  listen,
  openAiDialect,
  parseLoose,
  presentedKey,
  promptTokens,
  readBody,
  sendJson,
  serveGeneration,
} from './fake-openai-server.mjs';

let argv = process.argv.slice(2);
if (argv[0] === '-m' && argv[1] === 'sglang.launch_server') argv = argv.slice(2);
else if (argv[0] === 'serve') argv = argv.slice(1);
const log = (text) =>
  process.stderr.write(`[${new Date().toISOString().slice(0, 19).replace('T', ' ')}] ${text}\n`);

if (argv.includes('--version')) {
  process.stdout.write('0.5.0\n');
  process.exit(0);
}

const { options } = parseLoose(argv, {
  booleans: [
    '--enable-metrics',
    '--enable-lora',
    '--trust-remote-code',
    '--disable-cuda-graph',
    '--skip-server-warmup',
  ],
  lists: ['--lora-paths'],
});
const one = (name) => options.get(name)?.at(-1);
const modelPath = one('--model-path') ?? one('--model');
if (modelPath === undefined) {
  process.stderr.write('launch_server.py: error: the following arguments are required: --model-path\n');
  process.exit(2);
}

const settings = fakeSettings('SGLANG');
const served = one('--served-model-name') ?? modelPath;
const loras = (options.get('--lora-paths') ?? []).map((spec) => {
  const eq = spec.indexOf('=');
  return eq < 0 ? { name: spec, path: spec } : { name: spec.slice(0, eq), path: spec.slice(eq + 1) };
});
const apiKey = one('--api-key');
const contextLength = Number(one('--context-length') ?? 4096);
const slots = new Slots(Number(one('--max-running-requests') ?? 256));
const inflight = new InFlight();
const counters = { prompt: 0, generation: 0 };
const created = Math.floor(Date.now() / 1000);
const dialect = openAiDialect();

crashLater(settings, log);
exitOnSignals(inflight, log, 'Received SIGTERM, shutting down');

if (Number(one('--node-rank') ?? 0) > 0) {
  idleWorker(
    log,
    `node rank ${one('--node-rank')} of ${one('--nnodes') ?? '?'}, joining ${one('--dist-init-addr') ?? '?'}; no HTTP server on this rank`,
  );
} else {
  await serve();
}

function error(res, status, message, type = 'BadRequestError') {
  sendJson(res, status, { object: 'error', message, type, param: null, code: status });
}

/** The adapter a request names, if any: by lora_path, by "SERVED:NAME", or by its name as the model. */
function resolveLora(body) {
  const names = [];
  if (typeof body.lora_path === 'string') names.push(body.lora_path);
  if (typeof body.model === 'string') {
    const colon = body.model.lastIndexOf(':');
    if (colon > 0) names.push(body.model.slice(colon + 1));
    names.push(body.model);
  }
  return loras
    .filter((l) => names.includes(l.name))
    .slice(0, 1)
    .map((l) => l.name);
}

function metricsText() {
  const label = `{model_name="${served}",tp_rank="0",pp_rank="0"}`;
  const line = (type, name, help, value) =>
    `# HELP sglang:${name} ${help}\n# TYPE sglang:${name} ${type}\nsglang:${name}${label} ${value}\n`;
  return [
    line('gauge', 'num_running_reqs', 'The number of running requests.', slots.running),
    line('gauge', 'num_queue_reqs', 'The number of requests in the waiting queue.', slots.waiting),
    line('gauge', 'token_usage', 'The token usage.', Math.min(1, slots.running / 16)),
    line('gauge', 'num_used_tokens', 'The number of used tokens.', slots.running * 100),
    line(
      'gauge',
      'max_total_num_tokens',
      'Maximum total number of tokens in the KV cache pool.',
      contextLength * 16,
    ),
    line('counter', 'prompt_tokens_total', 'Number of prefill tokens processed.', counters.prompt),
    line('counter', 'generation_tokens_total', 'Number of generation tokens processed.', counters.generation),
  ].join('');
}

async function route(req, res) {
  echoRequestId(req, res);
  const path = new URL(req.url ?? '/', 'http://fake').pathname;
  if (path === '/health' || path === '/health_generate') {
    res.writeHead(200, { 'Content-Length': 0 });
    return res.end();
  }
  if (path === '/metrics') {
    if (one('--enable-metrics') !== 'true') return sendJson(res, 404, { detail: 'Not Found' });
    return sendJson(res, 200, metricsText(), { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' });
  }
  if (apiKey !== undefined && presentedKey(req) !== apiKey)
    return sendJson(res, 401, { error: 'Unauthorized' });
  if (req.method === 'GET' && (path === '/v1/models' || path === '/get_model_info')) {
    if (path === '/get_model_info')
      return sendJson(res, 200, { model_path: modelPath, tokenizer_path: modelPath, is_generation: true });
    const card = (id, root, parent) => ({
      id,
      object: 'model',
      created,
      owned_by: 'sglang',
      root,
      parent,
      max_model_len: contextLength,
    });
    return sendJson(res, 200, {
      object: 'list',
      data: [card(served, modelPath, null), ...loras.map((l) => card(l.name, l.path, served))],
    });
  }
  const kinds = {
    '/v1/chat/completions': 'chat',
    '/v1/completions': 'completion',
    '/v1/embeddings': 'embeddings',
  };
  const kind = req.method === 'POST' ? kinds[path] : undefined;
  if (kind === undefined) return sendJson(res, 404, { detail: 'Not Found' });

  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    return error(res, 400, `JSON decode error: ${e.message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return error(res, 400, 'Input should be a valid dictionary');
  if (kind === 'chat' && !Array.isArray(body.messages)) return error(res, 400, 'messages: Field required');
  if (kind === 'completion' && body.prompt === undefined) return error(res, 400, 'prompt: Field required');
  if (settings.failStatus > 0)
    return error(
      res,
      settings.failStatus,
      `fake failure (FAKE_SGLANG_FAIL_STATUS=${settings.failStatus})`,
      'InternalServerError',
    );
  const model = typeof body.model === 'string' ? body.model : served;
  const xFake = { engine: 'sglang', model: body.model ?? null, lora: resolveLora(body), received: body };
  if (kind === 'embeddings') return sendJson(res, 200, embeddingsBody(body, model, xFake));
  const result = await serveGeneration({ res, kind, body, dialect, settings, slots, inflight, model, xFake });
  counters.prompt += promptTokens(body);
  counters.generation += result.n;
}

async function serve() {
  log(
    `server_args=ServerArgs(model_path='${modelPath}', served_model_name='${served}', tp_size=${one('--tp-size') ?? one('--tp') ?? 1})`,
  );
  log('Load weight begin.');
  await new Promise((resolve) => setTimeout(resolve, settings.loadMs));
  log('Load weight end.');
  const server = http.createServer((req, res) => {
    route(req, res).catch((e) => {
      if (!res.headersSent) error(res, 500, String(e?.message ?? e), 'InternalServerError');
    });
  });
  const host = one('--host') ?? '127.0.0.1';
  let port;
  try {
    port = await listen(server, host, Number(one('--port') ?? 30000));
  } catch {
    process.stderr.write(
      `ERROR:    [Errno 98] error while attempting to bind on address ('${host}', ${one('--port') ?? 30000}): address already in use\n`,
    );
    process.exit(1);
  }
  log(`Uvicorn running on http://${host}:${port} (Press CTRL+C to quit)`);
  log('The server is fired up and ready to roll!');
}
