// A fake inference engine that behaves as a real one does under load, for bench:routing:
// a number of slots (requests past them wait in the engine's queue), one prefill at a time
// whose length grows with the prompt tokens not already in this replica's prefix cache (an
// LRU of 64-token blocks, chained hashes as vLLM's automatic prefix caching keys them),
// then decode at a fixed time per token while the request holds its slot, streamed as
// OpenAI's server-sent events. /metrics answers in the engine's own format (vLLM, SGLang or
// llama.cpp, which has no KV metric). The bench reads its state directly for the oracle.
//
// What it leaves out, on purpose: decode does not slow as the batch grows, and prefill does
// not pause decode; both would make load matter more, not change which policy wins.
import { createServer } from 'node:http';

/** Characters per token of the crude tokenizer. */
export const CHARS_PER_TOKEN = 4;
/** Tokens per cache block (vLLM's default block is 16; llm-d's index uses 64). */
export const BLOCK_TOKENS = 64;
const BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN;

/** The prompt as a ChatML template lays it out: what the engine tokenizes. */
export function templated(messages) {
  let text = '';
  for (const m of messages) text += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
  return `${text}<|im_start|>assistant\n`;
}

/** Chained hashes of the prompt's full blocks (FNV-1a carried across blocks), and its length in tokens. */
export function engineBlocks(text) {
  const hashes = [];
  let h = 0x811c9dc5;
  const full = text.length - (text.length % BLOCK_CHARS);
  for (let i = 0; i < full; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
    if ((i + 1) % BLOCK_CHARS === 0) hashes.push(h >>> 0);
  }
  return { hashes, tokens: Math.ceil(text.length / CHARS_PER_TOKEN) };
}

/** The metric names each engine exports, as the fleet's route table names them. */
export const loadMetricsOf = {
  vllm: {
    running: 'vllm:num_requests_running',
    waiting: 'vllm:num_requests_waiting',
    kvUsage: 'vllm:kv_cache_usage_perc',
  },
  sglang: {
    running: 'sglang:num_running_reqs',
    waiting: 'sglang:num_queue_reqs',
    kvUsage: 'sglang:token_usage',
  },
  llamacpp: { running: 'llamacpp:requests_processing', waiting: 'llamacpp:requests_deferred' },
};

/**
 * One replica. Times in ms: `prefillMsPerToken` per uncached prompt token (one prefill at a
 * time per replica), `decodeMsPerToken` per output token (each slot on its own).
 */
export class SimEngine {
  constructor(o) {
    this.id = o.id;
    this.engine = o.engine;
    this.slots = o.slots;
    this.cacheBlocks = o.cacheBlocks;
    this.prefillMsPerToken = o.prefillMsPerToken;
    this.decodeMsPerToken = o.decodeMsPerToken;
    this.apiKey = o.apiKey;
    this.servedName = o.servedName ?? 'sim';
    this.now = o.now ?? (() => performance.now());
    /** Block hash -> true, least recently used first. */
    this.cache = new Map();
    /** Blocks of prompts waiting for or in prefill: cached by the time a later prefill runs. */
    this.pending = new Map();
    this.running = new Set();
    this.waiting = [];
    this.prefillQueue = [];
    this.prefilling = undefined;
    this.prefillEndsAt = 0;
    this.promptTokens = 0;
    this.cachedTokens = 0;
    this.generated = 0;
    this.requests = 0;
    this.server = undefined;
    this.url = undefined;
  }

  async listen() {
    this.server = createServer((req, res) => this.#handle(req, res));
    this.server.keepAliveTimeout = 60_000;
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this.url;
  }

  async close() {
    for (const job of [...this.running, ...this.waiting]) job.cancel();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /** Forgets the cache and counters between runs. */
  reset() {
    this.cache.clear();
    this.pending.clear();
    this.promptTokens = 0;
    this.cachedTokens = 0;
    this.generated = 0;
    this.requests = 0;
  }

  /** Leading blocks held, counting those a queued prefill will have cached first. */
  matched(hashes, withPending) {
    let n = 0;
    while (n < hashes.length && (this.cache.has(hashes[n]) || (withPending && this.pending.has(hashes[n]))))
      n++;
    return n;
  }

  /**
   * What the oracle sees: the time this prompt would wait for its first token here now,
   * from the true queue (slots, prefills ahead) and the true cache.
   */
  predictTtft({ hashes, tokens }) {
    const now = this.now();
    // A slot: at once, or when the k-th running request is expected to end.
    let slotAt = now;
    if (this.running.size + this.waiting.length >= this.slots) {
      const ends = [...this.running].map((j) => j.expectedEnd).sort((a, b) => a - b);
      const k = this.running.size + this.waiting.length - this.slots;
      slotAt = ends[Math.min(k, ends.length - 1)] ?? now;
    }
    let prefillFree = Math.max(this.prefillEndsAt, now);
    for (const job of this.prefillQueue) prefillFree += job.uncachedEstimate * this.prefillMsPerToken;
    const uncached = Math.max(1, tokens - this.matched(hashes, true) * BLOCK_TOKENS);
    return Math.max(slotAt, prefillFree) - now + uncached * this.prefillMsPerToken;
  }

  metrics() {
    const running = this.running.size;
    const waiting = this.waiting.length;
    let held = 0;
    for (const job of this.running) held += job.tokens + job.sent;
    const kv = Math.min(1, held / (this.cacheBlocks * BLOCK_TOKENS));
    const label = `{model_name="${this.servedName}"}`;
    const gauge = (name, help, value, labels = '') =>
      `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name}${labels} ${value}\n`;
    const counter = (name, help, value, labels = '') =>
      `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name}${labels} ${value}\n`;
    switch (this.engine) {
      case 'vllm':
        return (
          gauge(
            'vllm:num_requests_running',
            'Number of requests in model execution batches.',
            running,
            label,
          ) +
          gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', waiting, label) +
          gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', kv, label) +
          counter(
            'vllm:prefix_cache_queries_total',
            'Prefix cache queries, in terms of number of queried tokens.',
            this.promptTokens,
            label,
          ) +
          counter(
            'vllm:prefix_cache_hits_total',
            'Prefix cache hits, in terms of number of cached tokens.',
            this.cachedTokens,
            label,
          )
        );
      case 'sglang':
        return (
          gauge('sglang:num_running_reqs', 'The number of running requests.', running, label) +
          gauge('sglang:num_queue_reqs', 'The number of requests in the waiting queue.', waiting, label) +
          gauge('sglang:token_usage', 'The token usage.', kv, label) +
          gauge(
            'sglang:cache_hit_rate',
            'The prefix cache hit rate.',
            this.promptTokens ? this.cachedTokens / this.promptTokens : 0,
            label,
          )
        );
      default:
        return (
          counter(
            'llamacpp:prompt_tokens_total',
            'Number of prompt tokens processed, excluding cached tokens',
            this.promptTokens - this.cachedTokens,
          ) +
          counter(
            'llamacpp:prompt_tokens_cached_total',
            'Number of prompt tokens reused from the cache',
            this.cachedTokens,
          ) +
          counter(
            'llamacpp:tokens_predicted_total',
            'Number of generation tokens processed',
            this.generated,
          ) +
          gauge('llamacpp:requests_processing', 'Number of requests processing', running) +
          gauge('llamacpp:requests_deferred', 'Number of requests deferred', waiting)
        );
    }
  }

  #handle(req, res) {
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}');
      return;
    }
    if (req.method === 'GET' && req.url === '/metrics') {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(this.metrics());
      return;
    }
    if (req.method === 'GET' && req.url === '/health') {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
      return;
    }
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"bad json","code":400}}');
        return;
      }
      this.#admit(body, res);
    });
  }

  #admit(body, res) {
    const { hashes, tokens } = engineBlocks(templated(body.messages ?? []));
    const job = {
      body,
      res,
      hashes,
      tokens,
      maxTokens: Math.max(1, body.max_tokens ?? 16),
      sent: 0,
      uncachedEstimate: 0,
      expectedEnd: Infinity,
      timer: undefined,
      done: false,
      cancel: () => {
        if (job.done) return;
        job.done = true;
        clearTimeout(job.timer);
        // Its prefill's timer is gone with it: the next prefill starts now, or the replica's
        // prefill queue would wait for ever.
        if (this.prefilling === job) {
          this.#unpend(job);
          this.prefilling = undefined;
          this.prefillEndsAt = this.now();
          this.#nextPrefill();
        }
      },
    };
    this.requests++;
    res.on('close', () => {
      if (job.done) return;
      job.cancel();
      this.#finish(job);
    });
    if (this.running.size < this.slots) this.#start(job);
    else this.waiting.push(job);
  }

  /** A slot is its: its prefill joins the replica's one prefill queue. */
  #start(job) {
    this.running.add(job);
    job.uncachedEstimate = Math.max(1, job.tokens - this.matched(job.hashes, true) * BLOCK_TOKENS);
    for (const h of job.hashes) this.pending.set(h, (this.pending.get(h) ?? 0) + 1);
    job.expectedEnd =
      this.now() + job.uncachedEstimate * this.prefillMsPerToken + job.maxTokens * this.decodeMsPerToken;
    this.prefillQueue.push(job);
    if (this.prefilling === undefined) this.#nextPrefill();
  }

  #nextPrefill() {
    const job = this.prefillQueue.shift();
    if (job === undefined) {
      this.prefilling = undefined;
      return;
    }
    if (job.done) {
      this.#unpend(job);
      this.#nextPrefill();
      return;
    }
    this.prefilling = job;
    const cached = Math.min(job.tokens - 1, this.matched(job.hashes, false) * BLOCK_TOKENS);
    this.promptTokens += job.tokens;
    this.cachedTokens += cached;
    const ms = (job.tokens - cached) * this.prefillMsPerToken;
    this.prefillEndsAt = this.now() + ms;
    job.timer = setTimeout(() => {
      this.#unpend(job);
      this.#cache(job.hashes);
      this.prefilling = undefined;
      this.prefillEndsAt = this.now();
      if (!job.done) this.#firstToken(job);
      this.#nextPrefill();
    }, ms);
  }

  #unpend(job) {
    for (const h of job.hashes) {
      const n = (this.pending.get(h) ?? 1) - 1;
      if (n <= 0) this.pending.delete(h);
      else this.pending.set(h, n);
    }
  }

  #cache(hashes) {
    const cache = this.cache;
    for (const h of hashes) {
      cache.delete(h);
      cache.set(h, true);
    }
    while (cache.size > this.cacheBlocks) cache.delete(cache.keys().next().value);
  }

  #firstToken(job) {
    const { res, body } = job;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    job.sent = 1;
    this.generated++;
    res.write(chunk(this.servedName, { role: 'assistant', content: word(job, 0) }, null));
    const includeUsage = body.stream_options?.include_usage === true;
    // The other tokens in chunks of 16: a real engine sends one event a token, but the
    // gateway's cost per event is not what this bench measures.
    const step = () => {
      if (job.done) return;
      const n = Math.min(16, job.maxTokens - job.sent);
      if (n > 0) {
        let text = '';
        for (let i = 0; i < n; i++) text += word(job, job.sent + i);
        job.sent += n;
        this.generated += n;
        res.write(chunk(this.servedName, { content: text }, null));
      }
      if (job.sent < job.maxTokens) {
        job.timer = setTimeout(step, Math.min(16, job.maxTokens - job.sent) * this.decodeMsPerToken);
        return;
      }
      const usage = {
        prompt_tokens: job.tokens,
        completion_tokens: job.sent,
        total_tokens: job.tokens + job.sent,
      };
      res.end(
        chunk(this.servedName, {}, 'length') +
          (includeUsage
            ? `data: ${JSON.stringify({ choices: [], usage, object: 'chat.completion.chunk' })}\n\n`
            : '') +
          'data: [DONE]\n\n',
      );
      job.done = true;
      this.#finish(job);
    };
    job.timer = setTimeout(step, Math.min(16, job.maxTokens - 1) * this.decodeMsPerToken);
  }

  #finish(job) {
    if (!this.running.delete(job)) {
      const i = this.waiting.indexOf(job);
      if (i >= 0) this.waiting.splice(i, 1);
      return;
    }
    const next = this.waiting.shift();
    if (next !== undefined) this.#start(next);
  }
}

function chunk(model, delta, finish) {
  return `data: ${JSON.stringify({ object: 'chat.completion.chunk', model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

/** Output token i of a request: four characters, different per conversation turn. */
function word(job, i) {
  const seed = job.hashes.length > 0 ? job.hashes[job.hashes.length - 1] : job.tokens;
  return ((seed + i * 2654435761) >>> 0).toString(36).slice(-3).padStart(3, 'x') + ' ';
}
