#!/usr/bin/env node
// A fake `vllm` CLI: `vllm serve MODEL [options]`, as llmgw launches it.
// - Nothing listens until FAKE_VLLM_LOAD_MS (default 200) has passed: connections are refused.
// - Its port is bound at start, before the model loads (vLLM binds early, listens once ready):
//   a port in use ends it at once with vLLM's traceback, `OSError: [Errno 98] Address
//   already in use`, exit 1.
// - /health answers 200 with an empty body, /metrics the vllm: gauges; neither needs the key.
// - The key (--api-key, else VLLM_API_KEY) guards /v1/* only: 401 {"error":"Unauthorized"}.
// - --served-model-name names the model (default: the MODEL argument); --lora-modules
//   name=path ... are further models whose parent is the served one.
// - --headless (a worker rank of a multi-node replica) serves nothing and waits for SIGTERM.
// - SIGTERM: exit 0, cutting whatever is in flight.
// Knobs as the llama fake, prefixed FAKE_VLLM_ (or FAKE_ENGINE_): LOAD_MS, DELAY_MS, TOKEN_MS,
// TOKENS, FAIL_STATUS, FAIL_AFTER_MS, FAIL_CODE, STALL, STALL_FILE. Answers carry "x_fake": {model, lora, received}.
import http from 'node:http';
import { setTimeout } from 'node:timers';
import { URL } from 'node:url';

import {
  InFlight,
  Slots,
  canBind,
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
  serveResponses,
} from './fake-openai-server.mjs';

const VERSION = '0.11.0';
const argv = process.argv.slice(2);
const log = (text) =>
  process.stderr.write(
    `INFO ${new Date().toISOString().slice(5, 19).replace('T', ' ')} [fake-vllm] ${text}\n`,
  );

if (argv[0] === '--version' || argv[0] === '-v') {
  process.stdout.write(`${VERSION}\n`);
  process.exit(0);
}
if (argv[0] !== 'serve') {
  process.stderr.write(
    `usage: vllm serve MODEL [options]\nvllm: error: argument subparser: invalid choice: '${argv[0] ?? ''}' (choose from 'serve')\n`,
  );
  process.exit(2);
}

const { positional, options } = parseLoose(argv.slice(1), {
  booleans: [
    '--enable-lora',
    '--headless',
    '--trust-remote-code',
    '--enforce-eager',
    '--enable-prefix-caching',
    '--disable-log-requests',
    '--enable-auto-tool-choice',
  ],
  lists: ['--lora-modules', '--served-model-name'],
});
const one = (name) => options.get(name)?.at(-1);
const modelPath = positional[0] ?? one('--model');
if (modelPath === undefined) {
  process.stderr.write('vllm serve: error: the following arguments are required: model_tag\n');
  process.exit(2);
}

const settings = fakeSettings('VLLM');
const servedNames = options.get('--served-model-name') ?? [modelPath];
const served = servedNames[0];
const loras = (options.get('--lora-modules') ?? []).map((spec) => {
  if (spec.trim().startsWith('{')) {
    const j = JSON.parse(spec);
    return { name: j.name, path: j.path };
  }
  const eq = spec.indexOf('=');
  return { name: spec.slice(0, eq), path: spec.slice(eq + 1) };
});
if (loras.length > 0 && one('--enable-lora') !== 'true') {
  process.stderr.write(
    'ValueError: Call to add_lora method failed: LoRA is not enabled. Use --enable-lora to enable LoRA.\n',
  );
  process.exit(1);
}
const apiKey = one('--api-key') ?? (process.env.VLLM_API_KEY || undefined);
const maxModelLen = Number(one('--max-model-len') ?? 4096);
const slots = new Slots(Number(one('--max-num-seqs') ?? 256));
const inflight = new InFlight();
const counters = { prompt: 0, generation: 0, success: 0 };
const created = Math.floor(Date.now() / 1000);
const dialect = openAiDialect();

crashLater(settings, log);
exitOnSignals(inflight, log, 'Shutting down (SIGTERM)');

if (one('--headless') === 'true') {
  idleWorker(
    log,
    `headless worker, node rank ${one('--node-rank') ?? '?'} of ${one('--nnodes') ?? '?'}, head ${one('--master-addr') ?? '?'}:${one('--master-port') ?? '?'}`,
  );
} else {
  await serve();
}

function error(res, status, message, type, param = null) {
  sendJson(res, status, { error: { message, type, param, code: status } });
}

/** The model a request names: the served one (or none, which means it), or a LoRA module. */
function resolveModel(body) {
  const asked = body.model;
  if (asked === undefined || asked === null || servedNames.includes(asked))
    return { model: asked ?? served, lora: [] };
  const lora = loras.find((l) => l.name === asked);
  return lora === undefined ? undefined : { model: asked, lora: [lora.name] };
}

function metricsText() {
  const label = `{engine="0",model_name="${served}"}`;
  const gauge = (name, help, value) =>
    `# HELP vllm:${name} ${help}\n# TYPE vllm:${name} gauge\nvllm:${name}${label} ${value}\n`;
  const counter = (name, help, value) =>
    `# HELP vllm:${name} ${help}\n# TYPE vllm:${name} counter\nvllm:${name}${label} ${value}\n`;
  return [
    gauge('num_requests_running', 'Number of requests in model execution batches.', slots.running),
    gauge('num_requests_waiting', 'Number of requests waiting to be processed.', slots.waiting),
    gauge(
      'kv_cache_usage_perc',
      'KV-cache usage. 1 means 100 percent usage.',
      Math.min(1, slots.running / 16),
    ),
    counter('prompt_tokens_total', 'Number of prefill tokens processed.', counters.prompt),
    counter('generation_tokens_total', 'Number of generation tokens processed.', counters.generation),
    counter('request_success_total', 'Count of successfully processed requests.', counters.success),
  ].join('');
}

async function route(req, res) {
  echoRequestId(req, res);
  const path = new URL(req.url ?? '/', 'http://fake').pathname;
  if (req.method === 'GET' && path === '/health') {
    res.writeHead(200, { 'Content-Length': 0 });
    return res.end();
  }
  if (req.method === 'GET' && path === '/metrics')
    return sendJson(res, 200, metricsText(), { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' });
  if (req.method === 'GET' && path === '/version') return sendJson(res, 200, { version: VERSION });
  if (path.startsWith('/v1') && apiKey !== undefined && presentedKey(req) !== apiKey)
    return sendJson(res, 401, { error: 'Unauthorized' });
  if (req.method === 'GET' && path === '/v1/models') {
    const card = (id, root, parent) => ({
      id,
      object: 'model',
      created,
      owned_by: 'vllm',
      root,
      parent,
      max_model_len: parent === null ? maxModelLen : null,
      permission: [],
    });
    return sendJson(res, 200, {
      object: 'list',
      data: [
        ...servedNames.map((n) => card(n, modelPath, null)),
        ...loras.map((l) => card(l.name, l.path, served)),
      ],
    });
  }
  const kinds = {
    '/v1/chat/completions': 'chat',
    '/v1/completions': 'completion',
    '/v1/embeddings': 'embeddings',
    '/v1/responses': 'responses',
  };
  const kind = req.method === 'POST' ? kinds[path] : undefined;
  if (kind === undefined) return sendJson(res, 404, { detail: 'Not Found' });

  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    return error(res, 400, `JSON decode error: ${e.message}`, 'BadRequestError');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return error(res, 400, 'Input should be a valid dictionary', 'BadRequestError');
  if (kind === 'chat' && !Array.isArray(body.messages))
    return error(
      res,
      400,
      "[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]",
      'BadRequestError',
    );
  if (kind === 'completion' && body.prompt === undefined)
    return error(
      res,
      400,
      "[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required'}]",
      'BadRequestError',
    );
  const resolved = resolveModel(body);
  if (resolved === undefined)
    return error(res, 404, `The model \`${body.model}\` does not exist.`, 'NotFoundError', 'model');
  if (settings.failStatus > 0)
    return error(
      res,
      settings.failStatus,
      `fake failure (FAKE_VLLM_FAIL_STATUS=${settings.failStatus})`,
      'InternalServerError',
    );
  const xFake = { engine: 'vllm', model: body.model ?? null, lora: resolved.lora, received: body };

  if (kind === 'embeddings') return sendJson(res, 200, embeddingsBody(body, resolved.model, xFake));
  if (kind === 'responses')
    return serveResponses({ res, body, settings, slots, inflight, model: resolved.model, xFake });
  const result = await serveGeneration({
    res,
    kind,
    body,
    dialect,
    settings,
    slots,
    inflight,
    model: resolved.model,
    xFake,
  });
  counters.prompt += promptTokens(body);
  counters.generation += result.n;
  if (result.finished) counters.success++;
}

/** vLLM's end when its port is in use: create_server_socket's bind raises, uncaught. */
function addressInUse() {
  process.stderr.write(
    'Traceback (most recent call last):\n' +
      '  File "/usr/local/bin/vllm", line 10, in <module>\n    sys.exit(main())\n' +
      '  File "/usr/local/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 1806, in setup_server\n' +
      '    sock = create_server_socket(sock_addr)\n' +
      '  File "/usr/local/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 1745, in create_server_socket\n' +
      '    sock.bind(addr)\n' +
      'OSError: [Errno 98] Address already in use\n',
  );
  process.exit(1);
}

async function serve() {
  log(`vLLM API server version ${VERSION}`);
  log(`non-default args: model=${modelPath}, served_model_name=${JSON.stringify(servedNames)}`);
  const host = one('--host');
  const wanted = Number(one('--port') ?? 8000);
  if (!(await canBind(host, wanted))) addressInUse();
  await new Promise((resolve) => setTimeout(resolve, settings.loadMs));
  const server = http.createServer((req, res) => {
    route(req, res).catch((e) => {
      if (!res.headersSent) error(res, 500, String(e?.message ?? e), 'InternalServerError');
    });
  });
  let port;
  try {
    port = await listen(server, host, wanted);
  } catch {
    addressInUse();
  }
  log(`Starting vLLM API server 0 on http://${host ?? '0.0.0.0'}:${port}`);
  log('Application startup complete.');
}
