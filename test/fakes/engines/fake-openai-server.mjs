// What the fake engines share: settings from the environment, a log in llama.cpp's
// style, slots and a queue, and the OpenAI routes (chat, completions, embeddings,
// responses), streamed and not, in each engine's own dialect. Node built-ins only.
import { Buffer } from 'node:buffer';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { clearTimeout, setInterval, setTimeout } from 'node:timers';

// Not a module of Node's; the lint of plain .mjs files knows only ECMAScript's globals.
const { AbortController } = globalThis;

// ---------------------------------------------------------------------------------------
// Settings

/**
 * A number from FAKE_<PREFIX>_<NAME>, else FAKE_ENGINE_<NAME> (one name a test can set for
 * any fake), else the default.
 */
export function envNumber(prefix, name, fallback) {
  for (const key of [`FAKE_${prefix}_${name}`, `FAKE_ENGINE_${name}`]) {
    const raw = process.env[key];
    if (raw !== undefined && raw !== '') {
      const n = Number(raw);
      if (Number.isFinite(n)) return n;
    }
  }
  return fallback;
}

/** The timing and failure knobs every fake reads. */
export function fakeSettings(prefix) {
  return {
    loadMs: envNumber(prefix, 'LOAD_MS', 200),
    tokenMs: envNumber(prefix, 'TOKEN_MS', 5),
    delayMs: envNumber(prefix, 'DELAY_MS', 0),
    tokens: envNumber(prefix, 'TOKENS', 8),
    failStatus: envNumber(prefix, 'FAIL_STATUS', 0),
    failAfterMs: envNumber(prefix, 'FAIL_AFTER_MS', 0),
    failCode: envNumber(prefix, 'FAIL_CODE', 134),
    // A stalled engine: generation requests get their head (a stream its first event) and then nothing.
    stall: envNumber(prefix, 'STALL', 0) > 0,
    stallFile: process.env[`FAKE_${prefix}_STALL_FILE`] || process.env.FAKE_ENGINE_STALL_FILE || undefined,
  };
}

/** Whether generation stalls now: STALL set, or STALL_FILE names a file that exists (a test switches it). */
function stalls(settings) {
  return settings.stall || (settings.stallFile !== undefined && existsSync(settings.stallFile));
}

/** Crashes the process FAIL_AFTER_MS after start, as an engine that hits an assertion does. */
export function crashLater(settings, log) {
  if (settings.failAfterMs <= 0) return;
  setTimeout(() => {
    log(`fake crash after ${settings.failAfterMs} ms (FAIL_AFTER_MS): exiting ${settings.failCode}`);
    process.exit(settings.failCode);
  }, settings.failAfterMs).unref();
}

/** SIGTERM: log `message`, cut whatever is in flight, exit 0 (vLLM and SGLang alike); SIGINT: exit 0. */
export function exitOnSignals(inflight, log, message) {
  process.on('SIGTERM', () => {
    log(message);
    for (const entry of inflight.all) entry.res.destroy();
    process.exit(0);
  });
  process.on('SIGINT', () => process.exit(0));
}

/** A worker rank of a multi-node replica: no HTTP server, alive until a signal. */
export function idleWorker(log, message) {
  log(message);
  setInterval(() => {}, 1 << 30);
}

export const sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

// ---------------------------------------------------------------------------------------
// Logging: llama.cpp's `M.SS.mmm.uuu L tag  message` on stderr.

const started = process.hrtime.bigint();

export function llamaStamp() {
  const us = Number((process.hrtime.bigint() - started) / 1000n);
  const min = Math.floor(us / 60_000_000);
  const sec = Math.floor(us / 1_000_000) % 60;
  const ms = Math.floor(us / 1000) % 1000;
  const micro = us % 1000;
  return `${min}.${String(sec).padStart(2, '0')}.${String(ms).padStart(3, '0')}.${String(micro).padStart(3, '0')}`;
}

export function llamaLog(level, text) {
  process.stderr.write(`${llamaStamp()} ${level} ${text}\n`);
}

// ---------------------------------------------------------------------------------------
// Arguments

/** Splits `--flag=value`; returns [flag, value | undefined]. */
export function splitFlag(arg) {
  const eq = arg.indexOf('=');
  return arg.startsWith('--') && eq > 2 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined];
}

/**
 * A lenient parser for the Python engines' argparse-style options, whose full lists the
 * fakes cannot know: `--flag value`, `--flag=value`, known booleans alone, known lists
 * taking every value up to the next flag. Returns { positional, options: Map<flag, value[]> }.
 */
export function parseLoose(argv, { booleans = [], lists = [] } = {}) {
  const options = new Map();
  const positional = [];
  const add = (k, v) => options.set(k, [...(options.get(k) ?? []), ...v]);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('-') || arg === '-') {
      positional.push(arg);
      continue;
    }
    const [flag, inline] = splitFlag(arg);
    if (inline !== undefined) add(flag, [inline]);
    else if (booleans.includes(flag)) add(flag, ['true']);
    else if (lists.includes(flag)) {
      const values = [];
      while (i + 1 < argv.length && !argv[i + 1].startsWith('--')) values.push(argv[++i]);
      add(flag, values);
    } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) add(flag, [argv[++i]]);
    else add(flag, ['true']);
  }
  return { positional, options };
}

// ---------------------------------------------------------------------------------------
// Slots: requests beyond the capacity wait (llama.cpp's "deferred", vLLM's "waiting").

export class Slots {
  constructor(capacity) {
    this.capacity = Math.max(1, capacity);
    this.busy = new Array(this.capacity).fill(null);
    this.queue = [];
  }

  get running() {
    return this.busy.filter((s) => s !== null).length;
  }

  get waiting() {
    return this.queue.length;
  }

  /** Resolves with a slot index once one is free; null if the signal aborts first. */
  acquire(task, signal) {
    const free = this.busy.indexOf(null);
    if (free >= 0 && this.queue.length === 0) {
      this.busy[free] = task;
      return Promise.resolve(free);
    }
    return new Promise((resolve) => {
      const entry = { task, resolve };
      this.queue.push(entry);
      signal?.addEventListener(
        'abort',
        () => {
          const i = this.queue.indexOf(entry);
          if (i >= 0) {
            this.queue.splice(i, 1);
            resolve(null);
          }
        },
        { once: true },
      );
    });
  }

  release(index) {
    if (index === null || index === undefined) return;
    const next = this.queue.shift();
    if (next) {
      this.busy[index] = next.task;
      next.resolve(index);
    } else this.busy[index] = null;
  }
}

// ---------------------------------------------------------------------------------------
// Content

const WORDS = [
  'Hello',
  ' from',
  ' the',
  ' fake',
  ' engine',
  ',',
  ' one',
  ' token',
  ' at',
  ' a',
  ' time',
  '.',
];

export function token(i) {
  return WORDS[i % WORDS.length];
}

/** A stable count of prompt tokens: about four characters each. */
export function promptTokens(body) {
  const source = body.messages ?? body.prompt ?? body.input ?? '';
  return Math.max(1, Math.ceil(JSON.stringify(source).length / 4));
}

export function randomId(
  length,
  alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
) {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += alphabet[b % alphabet.length];
  return out;
}

export const hexId = (n = 32) => randomId(n, '0123456789abcdef');

/** A small deterministic vector for a text. */
export function embedding(text, dims = 8) {
  let h = 2166136261;
  for (const ch of String(text)) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  const v = [];
  for (let i = 0; i < dims; i++) {
    h = Math.imul(h ^ (h >>> 13), 2246822519) >>> 0;
    v.push((h / 0xffffffff) * 2 - 1);
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// HTTP helpers

export function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res, status, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    ...headers,
    'Content-Type': headers['Content-Type'] ?? 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Echoes X-Request-Id, which a gateway sends to follow a request across processes. */
export function echoRequestId(req, res) {
  const id = req.headers['x-request-id'];
  if (typeof id === 'string' && id !== '') res.setHeader('X-Request-Id', id);
}

/** The presented key: `Authorization: Bearer K`, or `X-Api-Key: K` where the engine reads it. */
export function presentedKey(req, { xApiKey = false } = {}) {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7);
  if (xApiKey && typeof req.headers['x-api-key'] === 'string') return req.headers['x-api-key'];
  return undefined;
}

/** Whether a port can be bound now: the fake's stand-in for binding a socket before listening on it. */
export async function canBind(host, port) {
  if (port === 0) return true;
  const probe = createServer();
  try {
    await listen(probe, host, port);
  } catch {
    return false;
  }
  await new Promise((resolve) => probe.close(resolve));
  return true;
}

/** Listens, resolving with the port bound (port 0 picks one), or rejecting with the error. */
export function listen(server, host, port) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address().port);
    });
  });
}

// ---------------------------------------------------------------------------------------
// Requests in flight, for the metrics and for SIGTERM.

export class InFlight {
  constructor() {
    this.all = new Set();
  }

  add(entry) {
    this.all.add(entry);
    return () => this.all.delete(entry);
  }

  get size() {
    return this.all.size;
  }
}

// ---------------------------------------------------------------------------------------
// Generation: one request's tokens, paced by the settings, stopped by its signal.

/**
 * Runs a generation: waits for a slot, DELAY_MS, then one token each TOKEN_MS, calling
 * onToken(text, i). Resolves { n, finish, slot, aborted, promptMs, predictedMs }.
 */
export async function generate({ body, settings, slots, signal, onToken, onSlot }) {
  const maxTokens = Number.isInteger(body.max_tokens)
    ? body.max_tokens
    : Number.isInteger(body.max_completion_tokens)
      ? body.max_completion_tokens
      : Number.isInteger(body.max_output_tokens)
        ? body.max_output_tokens
        : Number.isInteger(body.n_predict)
          ? body.n_predict
          : undefined;
  const count = maxTokens ?? settings.tokens;
  const slot = await slots.acquire({ body }, signal);
  if (slot === null) return { n: 0, finish: null, slot, aborted: true, promptMs: 0, predictedMs: 0 };
  onSlot?.(slot);
  try {
    const t0 = Date.now();
    await sleep(settings.delayMs, signal);
    const t1 = Date.now();
    let n = 0;
    for (; n < count; n++) {
      if (signal?.aborted) break;
      if (n > 0) await sleep(settings.tokenMs, signal);
      if (signal?.aborted) break;
      await onToken?.(token(n), n);
    }
    const aborted = signal?.aborted === true;
    return {
      n,
      finish: maxTokens === undefined ? 'stop' : 'length',
      slot,
      aborted,
      promptMs: t1 - t0,
      predictedMs: Date.now() - t1,
    };
  } finally {
    slots.release(slot);
  }
}

export function usageOf(prompt, completion, extra = {}) {
  return {
    completion_tokens: completion,
    prompt_tokens: prompt,
    total_tokens: prompt + completion,
    ...extra,
  };
}

/** Writes one server-sent event. */
export function sse(res, data) {
  if (res.destroyed || res.writableEnded) return;
  res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

/**
 * Serves a generation request (chat or completion) in an engine's dialect:
 *   dialect.chat / dialect.completion: { id(), body(ctx), first(ctx), piece(ctx, text), finish(ctx) }
 *   (first may return undefined: no opening chunk; finish returns the closing events)
 * ctx: { id, created, model, text, n, finish, prompt, xFake, timings, includeUsage }.
 * Also keeps the request in flight for its whole life, and stops it when the client goes.
 * Resolves { n, finished }: the tokens generated and whether the answer was sent whole.
 */
export async function serveGeneration({
  res,
  kind,
  body,
  dialect,
  settings,
  slots,
  inflight,
  model,
  xFake,
  headers = {},
  onSlot,
}) {
  const d = dialect[kind];
  const controller = new AbortController();
  const stream = body.stream === true;
  const entry = { stream, res, controller, kind };
  const done = inflight.add(entry);
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const ctx = {
    id: d.id(),
    created: Math.floor(Date.now() / 1000),
    model,
    text: '',
    n: 0,
    finish: null,
    prompt: promptTokens(body),
    xFake,
    includeUsage: body.stream_options?.include_usage === true,
    timings: undefined,
  };
  try {
    if (stalls(settings)) {
      // The head (and a stream's first event), then nothing until the client goes.
      if (stream) {
        res.writeHead(200, { ...headers, 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
        const first = d.first(ctx);
        if (first !== undefined) sse(res, first);
        else sse(res, d.piece(ctx, ''));
      } else {
        res.writeHead(200, { ...headers, 'Content-Type': 'application/json', 'Content-Length': '100' });
        res.flushHeaders();
      }
      await new Promise((resolve) => controller.signal.addEventListener('abort', resolve, { once: true }));
      return { n: 0, finished: false };
    }
    if (stream) {
      let opened = false;
      const open = () => {
        if (opened) return;
        opened = true;
        res.writeHead(200, {
          ...headers,
          'Content-Type': 'text/event-stream',
          'Cache-Control': 'no-cache',
          'X-Accel-Buffering': 'no',
        });
        const first = d.first(ctx);
        if (first !== undefined) sse(res, first);
      };
      const r = await generate({
        body,
        settings,
        slots,
        signal: controller.signal,
        onSlot,
        onToken: (text) => {
          open();
          ctx.text += text;
          ctx.n++;
          sse(res, d.piece(ctx, text));
        },
      });
      if (r.aborted || entry.cut) return { n: ctx.n, finished: false };
      open();
      Object.assign(ctx, { finish: r.finish, timings: timingsOf(ctx, r) });
      for (const event of d.finish(ctx)) sse(res, event);
      sse(res, '[DONE]');
      res.end();
      return { n: ctx.n, finished: true };
    } else {
      const r = await generate({
        body,
        settings,
        slots,
        signal: controller.signal,
        onSlot,
        onToken: (text) => {
          ctx.text += text;
          ctx.n++;
        },
      });
      if (r.aborted || entry.cut) return { n: ctx.n, finished: false };
      Object.assign(ctx, { finish: r.finish, timings: timingsOf(ctx, r) });
      sendJson(res, 200, d.body(ctx), headers);
      return { n: ctx.n, finished: true };
    }
  } finally {
    done();
    entry.onDone?.();
  }
}

function timingsOf(ctx, r) {
  const promptMs = Math.max(r.promptMs, 0.001);
  const predictedMs = Math.max(r.predictedMs, 0.001);
  return {
    cache_n: 0,
    prompt_n: ctx.prompt,
    prompt_ms: promptMs,
    prompt_per_token_ms: promptMs / ctx.prompt,
    prompt_per_second: (ctx.prompt / promptMs) * 1000,
    predicted_n: ctx.n,
    predicted_ms: predictedMs,
    predicted_per_token_ms: ctx.n > 0 ? predictedMs / ctx.n : 0,
    predicted_per_second: (ctx.n / predictedMs) * 1000,
  };
}

// ---------------------------------------------------------------------------------------
// The OpenAI dialect of vLLM and SGLang (they differ in ids and error bodies only here).

export function openAiDialect({ idPrefix = true } = {}) {
  const id = (prefix) => () => (idPrefix ? `${prefix}-${hexId()}` : hexId());
  return {
    chat: {
      id: id('chatcmpl'),
      body: (c) => ({
        id: c.id,
        object: 'chat.completion',
        created: c.created,
        model: c.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: c.text, tool_calls: [] },
            logprobs: null,
            finish_reason: c.finish,
            stop_reason: null,
          },
        ],
        usage: usageOf(c.prompt, c.n),
        x_fake: c.xFake,
      }),
      first: (c) => ({
        id: c.id,
        object: 'chat.completion.chunk',
        created: c.created,
        model: c.model,
        choices: [
          { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
        ],
        x_fake: c.xFake,
      }),
      piece: (c, text) => ({
        id: c.id,
        object: 'chat.completion.chunk',
        created: c.created,
        model: c.model,
        choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }],
      }),
      finish: (c) => [
        {
          id: c.id,
          object: 'chat.completion.chunk',
          created: c.created,
          model: c.model,
          choices: [
            { index: 0, delta: { content: '' }, logprobs: null, finish_reason: c.finish, stop_reason: null },
          ],
        },
        ...(c.includeUsage
          ? [
              {
                id: c.id,
                object: 'chat.completion.chunk',
                created: c.created,
                model: c.model,
                choices: [],
                usage: usageOf(c.prompt, c.n),
              },
            ]
          : []),
      ],
    },
    completion: {
      id: id('cmpl'),
      body: (c) => ({
        id: c.id,
        object: 'text_completion',
        created: c.created,
        model: c.model,
        choices: [{ index: 0, text: c.text, logprobs: null, finish_reason: c.finish, stop_reason: null }],
        usage: usageOf(c.prompt, c.n),
        x_fake: c.xFake,
      }),
      first: () => undefined,
      piece: (c, text) => ({
        id: c.id,
        object: 'text_completion',
        created: c.created,
        model: c.model,
        choices: [{ index: 0, text, logprobs: null, finish_reason: null }],
        ...(c.n === 1 ? { x_fake: c.xFake } : {}),
      }),
      finish: (c) => [
        {
          id: c.id,
          object: 'text_completion',
          created: c.created,
          model: c.model,
          choices: [{ index: 0, text: '', logprobs: null, finish_reason: c.finish, stop_reason: null }],
        },
        ...(c.includeUsage
          ? [
              {
                id: c.id,
                object: 'text_completion',
                created: c.created,
                model: c.model,
                choices: [],
                usage: usageOf(c.prompt, c.n),
              },
            ]
          : []),
      ],
    },
  };
}

/** /v1/embeddings in the OpenAI shape. */
export function embeddingsBody(body, model, xFake) {
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  const prompt = promptTokens(body);
  return {
    id: `embd-${hexId()}`,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model,
    data: inputs.map((text, index) => ({ index, object: 'embedding', embedding: embedding(text) })),
    usage: { prompt_tokens: prompt, total_tokens: prompt, completion_tokens: 0 },
    x_fake: xFake,
  };
}

/** A minimal /v1/responses answer (not streamed). */
export async function serveResponses({ res, body, settings, slots, inflight, model, xFake }) {
  const controller = new AbortController();
  const done = inflight.add({ stream: false, res, controller, kind: 'responses' });
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  let text = '';
  try {
    const r = await generate({
      body,
      settings,
      slots,
      signal: controller.signal,
      onToken: (t) => {
        text += t;
      },
    });
    if (r.aborted) return;
    const input = promptTokens(body);
    sendJson(res, 200, {
      id: `resp_${hexId()}`,
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      model,
      status: 'completed',
      output: [
        {
          type: 'message',
          id: `msg_${hexId()}`,
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text, annotations: [] }],
        },
      ],
      usage: { input_tokens: input, output_tokens: r.n, total_tokens: input + r.n },
      x_fake: xFake,
    });
  } finally {
    done();
  }
}
