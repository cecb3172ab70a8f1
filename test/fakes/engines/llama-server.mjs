#!/usr/bin/env node
// A fake llama.cpp `llama-server`, answering as build 10587 did in the captures of
// shared/reference/llama-server/ (bodies, status codes, log lines, exit codes, SIGTERM).
// Environment knobs (FAKE_ENGINE_* works for each FAKE_LLAMA_*):
//   FAKE_LLAMA_LOAD_MS      how long "loading" lasts, answering 503 (default 200)
//   FAKE_LLAMA_DELAY_MS     before the first token of each request (default 0)
//   FAKE_LLAMA_TOKEN_MS     between tokens (default 5)
//   FAKE_LLAMA_TOKENS       tokens when a request gives no max_tokens (default 8)
//   FAKE_LLAMA_FAIL_STATUS  answer every completion with this HTTP status
//   FAKE_LLAMA_STALL=1      stall: completions get their head (a stream its first event), then nothing
//   FAKE_LLAMA_STALL_FILE   stall only while this file exists (a test starts and ends the stall)
//   FAKE_LLAMA_FAIL_AFTER_MS, FAKE_LLAMA_FAIL_CODE  exit with FAIL_CODE (134) after that long
//   FAKE_LLAMA_DEVICES      what --list-devices prints, one device per line or ';'
//   FAKE_LLAMA_N_CTX_TRAIN  the model's training context (default 2048)
// Every answer carries "x_fake": {model, lora, received} so a test sees what arrived.
import { existsSync } from 'node:fs';
import http from 'node:http';
import { setTimeout } from 'node:timers';
import { URL } from 'node:url';
import { basename } from 'node:path';

import {
  InFlight,
  Slots,
  crashLater,
  echoRequestId,
  embedding,
  envNumber,
  fakeSettings,
  listen,
  llamaLog,
  presentedKey,
  promptTokens,
  randomId,
  readBody,
  sendJson,
  serveGeneration,
  usageOf,
} from './fake-openai-server.mjs';
import { valued, switches } from './llama-args.mjs';
import { chatRefusal, llamaParse, readRaw } from './llama-refusals.mjs';

const BUILD = 'b10587-3f545becc';
const argv = process.argv.slice(2);

if (argv.includes('--version')) {
  process.stderr.write(
    'version: 0.2.0-dev (build 10587, commit 3f545becc)\nbuilt with GNU 12.2.0 for Linux x86_64\n',
  );
  process.exit(0);
}
if (argv.includes('--list-devices')) {
  const devices = (process.env.FAKE_LLAMA_DEVICES ?? '')
    .split(/[;\n]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  process.stdout.write(
    `Available devices:\n${devices.length === 0 ? '  (none)\n' : devices.map((d) => `  ${d}\n`).join('')}`,
  );
  process.exit(0);
}
if (argv.includes('-h') || argv.includes('--help')) {
  process.stdout.write(
    'usage: llama-server [options]\n\n(a fake: see test/fakes/engines/llama-server.mjs)\n',
  );
  process.exit(0);
}

// --- arguments, as llama.cpp's parser takes them: `--flag value` only, `_` read as `-` (llama-args.mjs) ---

function die(text) {
  process.stderr.write(text);
  process.exit(1);
}

const opts = {};
const adapters = [];
for (let i = 0; i < argv.length; i++) {
  let arg = argv[i];
  if (arg.startsWith('--')) arg = arg.replaceAll('_', '-');
  if (switches[arg] !== undefined) {
    opts[switches[arg]] = true;
    continue;
  }
  const key = valued[arg];
  if (key === undefined) die(`error: invalid argument: ${argv[i]}\n`);
  if (i + 1 >= argv.length)
    die(
      `error while handling argument "${arg}": expected value for argument\n\nto show complete usage, run with -h\n`,
    );
  const value = argv[++i];
  // LoRA adapters, in the order given: --lora FILE,... (scale 1), --lora-scaled FILE:SCALE,...
  // The value is checked as it is read, so the two-argument form fails on its first half.
  if (key === 'lora') for (const path of value.split(',')) adapters.push({ path, scale: 1 });
  else if (key === 'loraScaled') {
    for (const item of value.split(',')) {
      const parts = item.split(':');
      if (parts.length !== 2 || parts[0] === '' || parts[1] === '' || !Number.isFinite(Number(parts[1]))) {
        die(
          'error while handling argument "--lora-scaled": lora-scaled format: FNAME:SCALE\n\nusage:\n' +
            '--lora-scaled FNAME:SCALE,...           path to LoRA adapter with user defined scaling (format:\n' +
            '                                        FNAME:SCALE,...)\n' +
            '                                        note: use comma-separated values\n\n\n' +
            'to show complete usage, run with -h\n',
        );
      }
      adapters.push({ path: parts[0], scale: Number(parts[1]) });
    }
  } else opts[key] = value;
}

const settings = fakeSettings('LLAMA');
const host = opts.host ?? '127.0.0.1';
const modelPath = opts.model ?? 'models/7B/ggml-model-f16.gguf';
const alias = opts.alias ?? basename(modelPath);
const apiKey = opts.apiKey ?? (process.env.LLAMA_API_KEY || undefined);
const nCtxTrain = envNumber('LLAMA', 'N_CTX_TRAIN', 2048);

// Slots, as build 10587 makes them (captures 80*): no -np is "auto", 4 slots on one
// unified KV pool; -np N gives N slots that split -c, which defaults to N × the model's
// context; --kv-unified lets each use up to all of -c, capped by the model's context.
const npGiven = opts.parallel === undefined ? undefined : Number(opts.parallel);
const nSlots = npGiven !== undefined && npGiven > 0 ? npGiven : 4;
const unified = npGiven === undefined || npGiven <= 0 ? opts.noKvUnified !== true : opts.kvUnified === true;
const ctxGiven = opts.ctx === undefined ? 0 : Number(opts.ctx);
const ctxTotal = ctxGiven > 0 ? ctxGiven : unified ? nCtxTrain : nCtxTrain * nSlots;
const nCtxSlot = unified ? Math.min(ctxTotal, nCtxTrain) : Math.floor(ctxTotal / nSlots);
const nThreads = opts.threads === undefined ? 4 : Number(opts.threads);

// --- serving ---

const slots = new Slots(nSlots);
const inflight = new InFlight();
const slotTask = new Array(nSlots).fill(null);
let taskCounter = 0;
const counters = {
  promptTokens: 0,
  promptSeconds: 0,
  predicted: 0,
  predictedSeconds: 0,
  decodes: 0,
  tokensMax: 0,
};
let ready = false;
let terminating = false;
const startUnix = Math.floor(Date.now() / 1000);

const BASE_HEADERS = { Server: 'llama.cpp', 'Access-Control-Allow-Origin': '' };
const JSON_TYPE = 'application/json; charset=utf-8';

function reply(res, status, body) {
  sendJson(res, status, body, { ...BASE_HEADERS, 'Content-Type': JSON_TYPE });
}

const LOADING = '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}';
const UNAUTHORIZED = '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}';
const NOT_FOUND = '{"error":{"message":"File Not Found","type":"not_found_error","code":404}}';
const NO_METRICS =
  '{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`","type":"not_supported_error"}}';
const NO_EMBEDDINGS =
  '{"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}}';

const errorTypes = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  501: 'not_supported_error',
  503: 'unavailable_error',
};
function fail(res, status, message) {
  reply(res, status, { error: { code: status, message, type: errorTypes[status] ?? 'server_error' } });
}

/** Which adapters a request runs with: the global scales, overridden by its "lora"; unknown ids ignored. */
function appliedLora(body) {
  const scales = adapters.map((a) => a.scale);
  for (const l of body.lora ?? [])
    if (Number.isInteger(l.id) && l.id >= 0 && l.id < scales.length) scales[l.id] = l.scale;
  return scales.map((scale, id) => ({ id, scale })).filter((l) => l.scale !== 0);
}

const chatDialect = {
  id: () => `chatcmpl-${randomId(32)}`,
  body: (c) => ({
    choices: [{ finish_reason: c.finish, index: 0, message: { role: 'assistant', content: c.text } }],
    created: c.created,
    model: c.model,
    system_fingerprint: BUILD,
    object: 'chat.completion',
    usage: usageOf(c.prompt, c.n, { prompt_tokens_details: { cached_tokens: 0 } }),
    id: c.id,
    timings: c.timings,
    x_fake: c.xFake,
  }),
  first: (c) => ({
    choices: [{ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } }],
    created: c.created,
    id: c.id,
    model: c.model,
    system_fingerprint: BUILD,
    object: 'chat.completion.chunk',
    x_fake: c.xFake,
  }),
  piece: (c, text) => ({
    choices: [{ finish_reason: null, index: 0, delta: { content: text } }],
    created: c.created,
    id: c.id,
    model: c.model,
    system_fingerprint: BUILD,
    object: 'chat.completion.chunk',
  }),
  finish: (c) => {
    const common = {
      created: c.created,
      id: c.id,
      model: c.model,
      system_fingerprint: BUILD,
      object: 'chat.completion.chunk',
    };
    const finish = { choices: [{ finish_reason: c.finish, index: 0, delta: {} }], ...common };
    if (!c.includeUsage) return [{ ...finish, timings: c.timings }];
    return [
      finish,
      {
        choices: [],
        ...common,
        usage: usageOf(c.prompt, c.n, { prompt_tokens_details: { cached_tokens: 0 } }),
        timings: c.timings,
      },
    ];
  },
};

const completionDialect = {
  id: () => `chatcmpl-${randomId(32)}`,
  body: (c) => ({
    choices: [{ text: c.text, index: 0, logprobs: null, finish_reason: c.finish }],
    created: c.created,
    model: c.model,
    system_fingerprint: BUILD,
    object: 'text_completion',
    usage: usageOf(c.prompt, c.n, { prompt_tokens_details: { cached_tokens: 0 } }),
    id: c.id,
    timings: c.timings,
    x_fake: c.xFake,
  }),
  first: () => undefined,
  piece: (c, text) => ({
    choices: [{ text, index: 0, logprobs: null, finish_reason: null }],
    created: c.created,
    model: c.model,
    system_fingerprint: BUILD,
    object: 'text_completion',
    id: c.id,
    ...(c.n === 1 ? { x_fake: c.xFake } : {}),
  }),
  // The last chunk of a streamed completion carries usage and timings, asked or not (capture 22b).
  finish: (c) => [
    {
      choices: [{ text: '', index: 0, logprobs: null, finish_reason: c.finish }],
      created: c.created,
      model: c.model,
      system_fingerprint: BUILD,
      object: 'text_completion',
      usage: usageOf(c.prompt, c.n, { prompt_tokens_details: { cached_tokens: 0 } }),
      id: c.id,
      timings: c.timings,
    },
  ],
};

async function generation(req, res, kind) {
  const { body, error } = llamaParse(await readRaw(req));
  if (error !== undefined) return fail(res, 500, error);
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return fail(res, 500, '[json.exception.type_error.302] type must be object');
  if (kind === 'chat' && body.messages === undefined) return fail(res, 400, "'messages' is required");
  if (kind === 'chat' && !Array.isArray(body.messages))
    return fail(res, 400, "Expected 'messages' to be an array");
  if (kind === 'completion' && body.prompt === undefined) return fail(res, 400, "'prompt' is required");
  const unreadable = kind === 'chat' ? chatRefusal(body, { vision: opts.mmproj !== undefined }) : undefined;
  if (unreadable !== undefined) return fail(res, 500, unreadable);
  if (
    body.lora !== undefined &&
    (!Array.isArray(body.lora) ||
      body.lora.some(
        (l) => typeof l !== 'object' || l === null || typeof l.id !== 'number' || typeof l.scale !== 'number',
      ))
  ) {
    return fail(
      res,
      400,
      "Field 'lora': Error: 'lora' must be an array of objects with 'id' and 'scale' fields",
    );
  }
  if (settings.failStatus > 0)
    return fail(res, settings.failStatus, `fake failure (FAKE_LLAMA_FAIL_STATUS=${settings.failStatus})`);

  const model = typeof body.model === 'string' ? body.model : alias;
  const xFake = {
    engine: 'llama-server',
    model: body.model ?? null,
    lora: appliedLora(body),
    received: body,
  };
  const task = taskCounter++;
  let slotIndex = null;
  let started = 0;
  const result = await serveGeneration({
    res,
    kind,
    body,
    settings,
    slots,
    inflight,
    model,
    xFake,
    dialect: { chat: chatDialect, completion: completionDialect },
    headers: BASE_HEADERS,
    onSlot: (slot) => {
      slotIndex = slot;
      started = Date.now();
      slotTask[slot] = { task, body };
      llamaLog('I', `slot launch_slot_: id  ${slot} | task ${task} | processing task, is_child = 0`);
    },
  });
  if (slotIndex !== null) {
    slotTask[slotIndex] = null;
    const n = result.n;
    counters.promptTokens += promptTokens(body);
    counters.predicted += n;
    counters.decodes += n;
    counters.predictedSeconds += (Date.now() - started) / 1000;
    counters.tokensMax = Math.max(counters.tokensMax, promptTokens(body) + n);
    if (!terminating)
      llamaLog(
        'I',
        `slot      release: id  ${slotIndex} | task ${task} | stop processing: n_tokens = ${promptTokens(body) + n}, truncated = 0`,
      );
  }
}

function metricsText() {
  const running = slots.running;
  const metric = (name, type, help, value) =>
    `# HELP llamacpp:${name} ${help}\n# TYPE llamacpp:${name} ${type}\nllamacpp:${name} ${value}\n`;
  return [
    metric(
      'prompt_tokens_total',
      'counter',
      'Number of prompt tokens processed, excluding cached tokens',
      counters.promptTokens,
    ),
    metric('prompt_tokens_cached_total', 'counter', 'Number of prompt tokens reused from the cache', 0),
    metric('prompt_seconds_total', 'counter', 'Total time spent processing prompts', counters.promptSeconds),
    metric('tokens_predicted_total', 'counter', 'Number of generation tokens processed', counters.predicted),
    metric(
      'tokens_predicted_seconds_total',
      'counter',
      'Total time spent generating tokens',
      counters.predictedSeconds,
    ),
    metric(
      'n_decode_total',
      'counter',
      'Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding',
      counters.decodes,
    ),
    metric(
      'n_tokens_max',
      'counter',
      'Largest observed sequence length (prompt + generation)',
      counters.tokensMax,
    ),
    metric('spec_decode_num_draft_tokens_total', 'counter', 'Speculative: Total draft tokens generated', 0),
    metric(
      'spec_decode_num_accepted_tokens_total',
      'counter',
      'Speculative: Total draft tokens accepted by the target model',
      0,
    ),
    metric(
      'spec_decode_num_drafts_total',
      'counter',
      'Speculative: Total speculative decoding verification steps',
      0,
    ),
    metric('prompt_tokens_seconds', 'gauge', 'Average prompt throughput in tokens/s', 0),
    metric(
      'predicted_tokens_seconds',
      'gauge',
      'Average generation throughput in tokens/s',
      counters.predictedSeconds > 0 ? +(counters.predicted / counters.predictedSeconds).toFixed(2) : 0,
    ),
    metric('requests_processing', 'gauge', 'Number of requests processing', running),
    metric('requests_deferred', 'gauge', 'Number of requests deferred', slots.waiting),
    metric(
      'n_busy_slots_per_decode',
      'gauge',
      'Average number of busy slots per llama_decode() call',
      running,
    ),
  ].join('');
}

function modelsBody() {
  return {
    models: [
      {
        name: alias,
        model: alias,
        modified_at: '',
        size: '',
        digest: '',
        type: 'model',
        description: '',
        tags: [''],
        capabilities: ['completion'],
        parameters: '',
        details: {
          parent_model: '',
          format: 'gguf',
          family: '',
          families: [''],
          parameter_size: '',
          quantization_level: '',
        },
      },
    ],
    object: 'list',
    data: [
      {
        id: alias,
        aliases: [alias],
        tags: [],
        object: 'model',
        created: startUnix,
        owned_by: 'llamacpp',
        meta: {
          vocab_type: true,
          n_vocab: 618,
          n_ctx: nCtxSlot,
          n_ctx_train: nCtxTrain,
          n_embd: 64,
          n_params: 153152,
          size: 306944,
          ftype: 'F16',
        },
      },
    ],
  };
}

function propsBody() {
  return {
    default_generation_settings: {
      params: {
        seed: 4294967295,
        temperature: 0.800000011920929,
        top_k: 40,
        top_p: 0.949999988079071,
        max_tokens: -1,
        n_predict: -1,
        stream: false,
        lora: [],
      },
      n_ctx: nCtxSlot,
    },
    total_slots: nSlots,
    model_alias: alias,
    model_ftype: 'F16',
    model_path: modelPath,
    modalities: { vision: opts.mmproj !== undefined, video: false, audio: false },
    endpoint_slots: opts.noSlots !== true,
    endpoint_props: opts.props === true,
    endpoint_metrics: opts.metrics === true,
    ui: opts.noWebui !== true,
    build_info: BUILD,
    is_sleeping: false,
  };
}

function slotsBody() {
  return slotTask.map((t, id) => ({
    id,
    n_ctx: nCtxSlot,
    speculative: false,
    is_processing: t !== null,
    ...(t === null
      ? {}
      : { id_task: t.task, params: { max_tokens: t.body.max_tokens ?? -1, stream: t.body.stream === true } }),
  }));
}

async function route(req, res) {
  echoRequestId(req, res);
  const url = new URL(req.url ?? '/', 'http://fake');
  const path = url.pathname;
  if (!ready) return reply(res, 503, LOADING);
  if (path === '/health' || path === '/v1/health') {
    if (url.searchParams.get('fail_on_no_slot') === '1' && slots.running >= nSlots)
      return fail(res, 503, 'no slot available');
    return reply(res, 200, '{"status":"ok"}');
  }
  if (apiKey !== undefined && presentedKey(req, { xApiKey: true }) !== apiKey) {
    llamaLog('W', 'srv    operator(): unauthorized: Invalid API Key');
    return reply(res, 401, UNAUTHORIZED);
  }
  const key = `${req.method} ${path}`;
  switch (key) {
    case 'GET /metrics':
      if (opts.metrics !== true) return reply(res, 501, NO_METRICS);
      return sendJson(res, 200, metricsText(), {
        ...BASE_HEADERS,
        'Process-Start-Time-Unix': String(startUnix),
        'Content-Type': 'text/plain; version=0.0.4',
      });
    case 'GET /v1/models':
    case 'GET /models':
      return reply(res, 200, modelsBody());
    case 'GET /props':
      return reply(res, 200, propsBody());
    case 'GET /slots':
      if (opts.noSlots === true)
        return fail(res, 501, 'This server does not support slots endpoint. Start it with `--slots`');
      return reply(res, 200, slotsBody());
    case 'GET /lora-adapters':
      return reply(
        res,
        200,
        adapters.map((a, id) => ({ id, path: a.path, scale: a.scale, task_name: '', prompt_prefix: '' })),
      );
    case 'POST /lora-adapters': {
      let list;
      try {
        list = JSON.parse(await readBody(req));
      } catch (e) {
        return fail(res, 500, `[json.exception.parse_error.101] ${e.message}`);
      }
      if (!Array.isArray(list)) return fail(res, 400, 'Request body must be an array');
      for (const l of list)
        if (Number.isInteger(l?.id) && adapters[l.id] !== undefined && typeof l.scale === 'number')
          adapters[l.id].scale = l.scale;
      return reply(res, 200, '{"success":true}');
    }
    case 'POST /v1/chat/completions':
    case 'POST /chat/completions':
      return generation(req, res, 'chat');
    case 'POST /v1/completions':
    case 'POST /completions':
    case 'POST /completion':
      return generation(req, res, 'completion');
    case 'POST /v1/embeddings':
    case 'POST /embeddings': {
      if (opts.embeddings !== true) return reply(res, 501, NO_EMBEDDINGS);
      const { body, error } = llamaParse(await readRaw(req));
      if (error !== undefined) return fail(res, 500, error);
      if (opts.pooling === 'none')
        return fail(
          res,
          400,
          "Pooling type 'none' is not OAI compatible. Please use a different pooling type",
        );
      const inputs = Array.isArray(body.input) ? body.input : [body.input];
      const prompt = promptTokens(body);
      return reply(res, 200, {
        model: typeof body.model === 'string' ? body.model : alias,
        object: 'list',
        usage: { prompt_tokens: prompt, total_tokens: prompt },
        data: inputs.map((text, index) => ({ embedding: embedding(text, 64), index, object: 'embedding' })),
        x_fake: { engine: 'llama-server', model: body.model ?? null, lora: [], received: body },
      });
    }
    default:
      return reply(res, 404, NOT_FOUND);
  }
}

const server = http.createServer((req, res) => {
  if (terminating) {
    req.socket.destroy();
    return;
  }
  route(req, res).catch((e) => {
    if (!res.headersSent) fail(res, 500, String(e?.message ?? e));
  });
});

// --- SIGTERM, as captures 40-42 show it: idle, exit 0 at once; a stream in flight is cut
// (no [DONE]) and the process exits 0; a non-streamed request in flight gets no answer,
// and the process waits until its client goes; a second SIGTERM exits 1 at once. ---

const hanging = new Set();
function exitWhenIdle() {
  if (hanging.size === 0) process.exit(0);
}
process.on('SIGTERM', () => {
  if (terminating) {
    process.stderr.write('Received second interrupt, terminating immediately.\n');
    process.exit(1);
  }
  terminating = true;
  llamaLog('I', 'srv    operator(): operator(): cleaning up before exit...');
  server.close();
  for (const entry of inflight.all) {
    entry.cut = true;
    entry.controller.abort();
    if (entry.stream) {
      entry.res.destroy();
    } else if (!entry.res.destroyed) {
      hanging.add(entry.res);
      entry.res.on('close', () => {
        hanging.delete(entry.res);
        llamaLog('W', 'srv          stop: cancel task, id_task = 0');
        exitWhenIdle();
      });
    }
  }
  exitWhenIdle();
});
process.on('SIGINT', () => process.kill(process.pid, 'SIGTERM'));

// --- start-up, in the order of capture 11 ---

if (opts.ngl !== undefined && (process.env.FAKE_LLAMA_DEVICES ?? '') === '') {
  process.stderr.write(
    'warning: no usable GPU found, --gpu-layers option will be ignored\n' +
      'warning: one possible reason is that llama.cpp was compiled without GPU support\n' +
      'warning: consult docs/build.md for compilation instructions\n',
  );
}
llamaLog('I', 'cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)');
crashLater(settings, (m) => llamaLog('E', `srv  llama_server: ${m}`));

let port;
try {
  port = await listen(server, host, Number(opts.port ?? 8080));
} catch {
  llamaLog(
    'E',
    `srv         start: couldn't bind HTTP server socket, hostname: ${host}, port: ${opts.port ?? 8080}`,
  );
  llamaLog('I', 'srv    operator(): operator(): cleaning up before exit...');
  llamaLog('E', 'srv  llama_server: exiting due to HTTP server error');
  process.exit(1);
}

llamaLog('I', `srv    load_model: loading model '${modelPath}'`);
if (!existsSync(modelPath)) {
  llamaLog('E', `gguf_init_from_file: failed to open GGUF file '${modelPath}' (No such file or directory)`);
  llamaLog(
    'E',
    `llama_model_load: error loading model: llama_model_loader: failed to load model from ${modelPath}`,
  );
  llamaLog('E', 'llama_model_load_from_file_impl: failed to load model');
  llamaLog('E', `cmn  common_init_: failed to load model '${modelPath}'`);
  llamaLog('E', `srv    load_model: failed to load model, '${modelPath}'`);
  llamaLog('I', 'srv    operator(): operator(): cleaning up before exit...');
  llamaLog('E', 'srv  llama_server: exiting due to model loading error');
  process.exit(1);
}
for (const file of [...adapters.map((a) => a.path), ...(opts.mmproj === undefined ? [] : [opts.mmproj])]) {
  if (existsSync(file)) continue;
  llamaLog('E', `gguf_init_from_file: failed to open GGUF file '${file}' (No such file or directory)`);
  if (file === opts.mmproj) llamaLog('E', `srv    load_model: failed to load multimodal model, '${file}'`);
  else {
    llamaLog(
      'E',
      `llama_adapter_lora_init: failed to apply lora adapter: failed to load lora adapter file from ${file}`,
    );
    llamaLog('E', `cmn  common_init_: failed to load lora adapter '${file}'`);
  }
  llamaLog('E', `srv    load_model: failed to create_context with model '${modelPath}'`);
  llamaLog('I', 'srv    operator(): operator(): cleaning up before exit...');
  llamaLog('E', 'srv  llama_server: exiting due to model loading error');
  process.exit(1);
}
await new Promise((resolve) => setTimeout(resolve, settings.loadMs));
llamaLog('I', `cmn          init: llama threadpool init, n_threads = ${nThreads}`);
llamaLog(
  'I',
  `srv    load_model: initializing, n_slots = ${nSlots}, n_ctx_slot = ${nCtxSlot}, kv_unified = '${unified}'`,
);
llamaLog('I', 'srv  llama_server: model loaded');
llamaLog('I', `srv  llama_server: listening on http://${host}:${port}`);
ready = true;
