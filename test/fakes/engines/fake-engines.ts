import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The fake engines, and a way to run one from a test. Each fake is an executable Node
 * script: point agent.engines.NAME.bin at it (a shard's settings.bin), or start it here.
 */
export const fakeLlamaServer = fileURLToPath(new URL('./llama-server.mjs', import.meta.url));
export const fakeVllm = fileURLToPath(new URL('./vllm.mjs', import.meta.url));
export const fakeSglang = fileURLToPath(new URL('./sglang.mjs', import.meta.url));

/** A port free now (the fakes answer 503 while loading, so a test must know it before they say). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      s.close(() => {
        resolve(port);
      });
    });
  });
}

/** An empty file to stand for a model or adapter: the llama fake checks that its files exist. */
export function fakeGguf(name = 'model.gguf'): string {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-fake-'));
  const path = join(dir, name);
  writeFileSync(path, 'GGUF');
  return path;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface FakeProcess {
  child: ChildProcess;
  /** stdout and stderr so far, merged. */
  output: () => string;
  /** Resolves once the output matches. */
  waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpMatchArray>;
  exited: Promise<Exit>;
  /** Sends a signal (SIGTERM by default) and resolves with how it exited. */
  stop: (signal?: NodeJS.Signals) => Promise<Exit>;
}

/** Runs a fake with these arguments; env is added to this process's environment. */
export function startFake(
  bin: string,
  args: readonly string[],
  env: Record<string, string> = {},
): FakeProcess {
  const child = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const waiters = new Set<{ pattern: RegExp; resolve: (m: RegExpMatchArray) => void }>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of waiters) {
      const m = out.match(w.pattern);
      if (m !== null) {
        waiters.delete(w);
        w.resolve(m);
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<Exit>((resolve) =>
    child.on('exit', (code, signal) => {
      resolve({ code, signal });
    }),
  );
  return {
    child,
    output: () => out,
    waitFor: (pattern, timeoutMs = 5000) =>
      new Promise((resolve, reject) => {
        const m = out.match(pattern);
        if (m !== null) {
          resolve(m);
          return;
        }
        const w = { pattern, resolve };
        waiters.add(w);
        setTimeout(() => {
          if (waiters.delete(w))
            reject(new Error(`no ${String(pattern)} in ${timeoutMs} ms; output:\n${out}`));
        }, timeoutMs).unref();
      }),
    exited,
    stop: (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

export interface RunningFake extends FakeProcess {
  port: number;
  url: string;
}

/**
 * Starts the fake llama-server on a free port with the flags llmgw always passes, and
 * waits until it is ready. `args` come after those; env may set LLAMA_API_KEY and FAKE_LLAMA_*.
 */
export async function startFakeLlama(
  options: { args?: readonly string[]; env?: Record<string, string>; model?: string } = {},
): Promise<RunningFake> {
  const port = await freePort();
  const model = options.model ?? fakeGguf();
  const p = startFake(
    fakeLlamaServer,
    ['--model', model, '--host', '127.0.0.1', '--port', String(port), '--metrics', ...(options.args ?? [])],
    {
      FAKE_LLAMA_LOAD_MS: '0',
      ...options.env,
    },
  );
  await Promise.race([
    p.waitFor(/listening on http:\/\//),
    p.exited.then(() => {
      throw new Error(`llama-server fake exited:\n${p.output()}`);
    }),
  ]);
  return { ...p, port, url: `http://127.0.0.1:${port}` };
}

/** Starts `vllm serve MODEL` (the fake) on a free port and waits until it listens. */
export async function startFakeVllm(
  options: { args?: readonly string[]; env?: Record<string, string>; model?: string } = {},
): Promise<RunningFake> {
  const port = await freePort();
  const p = startFake(
    fakeVllm,
    [
      'serve',
      options.model ?? '/models/qwen',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      ...(options.args ?? []),
    ],
    {
      FAKE_VLLM_LOAD_MS: '0',
      ...options.env,
    },
  );
  await Promise.race([
    p.waitFor(/Application startup complete/),
    p.exited.then(() => {
      throw new Error(`vllm fake exited:\n${p.output()}`);
    }),
  ]);
  return { ...p, port, url: `http://127.0.0.1:${port}` };
}

/** Starts the SGLang fake as `-m sglang.launch_server --model-path MODEL` on a free port, and waits until it listens. */
export async function startFakeSglang(
  options: { args?: readonly string[]; env?: Record<string, string>; model?: string } = {},
): Promise<RunningFake> {
  const port = await freePort();
  const p = startFake(
    fakeSglang,
    [
      '-m',
      'sglang.launch_server',
      '--model-path',
      options.model ?? '/models/qwen',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      ...(options.args ?? []),
    ],
    { FAKE_SGLANG_LOAD_MS: '0', ...options.env },
  );
  await Promise.race([
    p.waitFor(/fired up and ready to roll/),
    p.exited.then(() => {
      throw new Error(`sglang fake exited:\n${p.output()}`);
    }),
  ]);
  return { ...p, port, url: `http://127.0.0.1:${port}` };
}

/** The `data:` payloads of a server-sent event stream, [DONE] included as the string. */
export function sseData(text: string): unknown[] {
  return text
    .split('\n\n')
    .map((block) => block.trim())
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice(6);
      return data === '[DONE]' ? data : (JSON.parse(data) as unknown);
    });
}
