#!/usr/bin/env node
// The smallest llama-server the gateway benchmark needs: enough for the llmgw agent to run
// it as a llama.cpp engine (flags, LLAMA_API_KEY, /health, /metrics) and for the load to
// hit its /v1/chat/completions, with as little work per request as a node:http server can
// do, so that the proxy in front of it is what the figures show.
// test/fakes/engines/llama-server.mjs is the faithful fake; this one is the fast one.
//
//   BENCH_ENGINE_MODE=instant    a small fixed completion, at once
//   BENCH_ENGINE_MODE=delay50    the same, 50 ms later
//   BENCH_ENGINE_MODE=stream100  server-sent events: 100 token chunks 10 ms apart, the first at
//                                once; then a usage chunk when stream_options.include_usage,
//                                then [DONE] (streamed whatever the request's `stream` says)
import http from 'node:http';

const argv = process.argv.slice(2);
if (argv.includes('--version')) {
  process.stderr.write('version: 0.0.0-bench (build 1, commit 0000000)\n');
  process.exit(0);
}
if (argv.includes('--list-devices')) {
  process.stdout.write('Available devices:\n  (none)\n');
  process.exit(0);
}

/** `--flag value` or `--flag=value`; every other flag (--metrics, --jinja, --threads N, ...) is ignored. */
function flag(...names) {
  for (let i = 0; i < argv.length; i++) {
    for (const name of names) {
      if (argv[i] === name && i + 1 < argv.length) return argv[i + 1];
      if (argv[i].startsWith(`${name}=`)) return argv[i].slice(name.length + 1);
    }
  }
  return undefined;
}

const host = flag('--host') ?? '127.0.0.1';
const port = Number(flag('--port') ?? 8080);
const alias = flag('--alias', '-a') ?? 'bench';
const parallel = Math.max(1, Number(flag('--parallel', '-np') ?? 1) || 1);
const apiKey = process.env.LLAMA_API_KEY || undefined;
const mode = process.env.BENCH_ENGINE_MODE ?? 'instant';
if (!['instant', 'delay50', 'stream100'].includes(mode)) {
  process.stderr.write(`BENCH_ENGINE_MODE=${mode}: expected instant, delay50 or stream100\n`);
  process.exit(1);
}
const expectedAuth = apiKey === undefined ? undefined : `Bearer ${apiKey}`;

const created = Math.floor(Date.now() / 1000);
const usage = { completion_tokens: 8, prompt_tokens: 11, total_tokens: 19 };
// One answer, serialised once: the engine's own cost per request stays near nothing.
const completion = Buffer.from(
  JSON.stringify({
    choices: [
      {
        finish_reason: 'length',
        index: 0,
        message: { role: 'assistant', content: 'Hello from the bench engine.' },
      },
    ],
    created,
    model: alias,
    object: 'chat.completion',
    usage,
    id: 'chatcmpl-bench',
  }),
);
const streamTokens = 100;
const streamUsage = { completion_tokens: streamTokens, prompt_tokens: 11, total_tokens: streamTokens + 11 };
const chunkOf = (delta, finish) =>
  `data: ${JSON.stringify({ choices: [{ finish_reason: finish, index: 0, delta }], created, id: 'chatcmpl-bench', model: alias, object: 'chat.completion.chunk' })}\n\n`;
const firstChunk = chunkOf({ role: 'assistant', content: null }, null);
const tokenChunk = chunkOf({ content: 'tok ' }, null);
const lastChunk = chunkOf({}, 'length');
const usageChunk = `data: ${JSON.stringify({ choices: [], created, id: 'chatcmpl-bench', model: alias, object: 'chat.completion.chunk', usage: streamUsage })}\n\n`;
const done = 'data: [DONE]\n\n';

const JSON_TYPE = 'application/json; charset=utf-8';
const HEALTH = Buffer.from('{"status":"ok"}');
const UNAUTHORIZED = Buffer.from(
  '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}',
);
const NOT_FOUND = Buffer.from('{"error":{"message":"File Not Found","type":"not_found_error","code":404}}');

let inFlight = 0;

function send(res, status, body) {
  res.writeHead(status, { 'Content-Type': JSON_TYPE, 'Content-Length': body.length });
  res.end(body);
}

function metrics() {
  // Slots busy, and requests past the slots waiting: what llama-server reports.
  const processing = Math.min(inFlight, parallel);
  const deferred = inFlight - processing;
  return [
    '# HELP llamacpp:requests_processing Number of requests processing',
    '# TYPE llamacpp:requests_processing gauge',
    `llamacpp:requests_processing ${processing}`,
    '# HELP llamacpp:requests_deferred Number of requests deferred',
    '# TYPE llamacpp:requests_deferred gauge',
    `llamacpp:requests_deferred ${deferred}`,
    '',
  ].join('\n');
}

function stream(res, includeUsage) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'X-Accel-Buffering': 'no' });
  // The first token at once (with the role chunk), the other 99 every 10 ms.
  res.write(firstChunk + tokenChunk);
  let sent = 1;
  const timer = setInterval(() => {
    res.write(tokenChunk);
    sent++;
    if (sent < streamTokens) return;
    clearInterval(timer);
    res.end(lastChunk + (includeUsage ? usageChunk : '') + done);
  }, 10);
  res.on('close', () => {
    clearInterval(timer);
    inFlight--;
  });
}

function chat(req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      send(
        res,
        400,
        Buffer.from('{"error":{"message":"invalid JSON","type":"invalid_request_error","code":400}}'),
      );
      return;
    }
    inFlight++;
    if (mode === 'stream100') {
      stream(res, body?.stream_options?.include_usage === true);
      return;
    }
    res.on('close', () => inFlight--);
    if (mode === 'instant') send(res, 200, completion);
    else setTimeout(() => send(res, 200, completion), 50);
  });
}

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const path = req.url ?? '/';
  if (req.method === 'GET' && path === '/health') {
    send(res, 200, HEALTH);
    return;
  }
  if (expectedAuth !== undefined && req.headers.authorization !== expectedAuth) {
    req.resume();
    send(res, 401, UNAUTHORIZED);
    return;
  }
  if (req.method === 'GET' && path === '/metrics') {
    const text = metrics();
    res.writeHead(200, {
      'Content-Type': 'text/plain; version=0.0.4',
      'Content-Length': Buffer.byteLength(text),
    });
    res.end(text);
    return;
  }
  if (req.method === 'POST' && path === '/v1/chat/completions') {
    chat(req, res);
    return;
  }
  req.resume();
  send(res, 404, NOT_FOUND);
});
// Connections idle between requests are kept: the proxies in front reuse them.
server.headersTimeout = 70_000;
server.listen(port, host, () => {
  process.stdout.write(`bench engine (${mode}) listening on http://${host}:${port}\n`);
});
const stop = () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
