import { execFile } from 'node:child_process';
import { delimiter, dirname } from 'node:path';

import { LlmgwError } from '../../core/errors.js';
import { parseListDevices, parseVersion } from '../../engines/llamacpp/llamacpp-engine.js';

import { engineEnv } from '../shards/process/engine-env.js';

import { setting } from './llama-asset.js';

/**
 * What the environment of an installed llama-server needs: release builds link their
 * libggml*.so and libllama.so, shipped beside the binary, by name. Merge it into the
 * environment of every run, the check here and the agent's launch alike.
 */
export function llamaEnv(bin: string, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const dir = dirname(bin);
  const current = env['LD_LIBRARY_PATH'] ?? '';
  if (current === '') return { LD_LIBRARY_PATH: dir };
  if (current.split(delimiter).includes(dir)) return { LD_LIBRARY_PATH: current };
  return { LD_LIBRARY_PATH: `${dir}${delimiter}${current}` };
}

export interface CheckOptions {
  /** The environment to run it in, before llamaEnv is added (default: engineEnv of process.env). */
  env?: NodeJS.ProcessEnv | undefined;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

export interface CheckedLlama {
  /** `b10587-3f545becc`, as llama-server names its own build; the first line it printed when that does not parse. */
  version: string;
  build?: number;
  devices: string[];
}

/** Runs `--version` and `--list-devices`: a build that cannot do both will not serve either. */
export async function checkLlama(bin: string, options: CheckOptions): Promise<CheckedLlama> {
  const v = await runOk(bin, ['--version'], options);
  // Printed on stderr (capture 01-version.txt); stdout as well in case a build moves it.
  const text = `${v.stderr}\n${v.stdout}`;
  const parsed = parseVersion(text);
  const devices = await listDevices(bin, options);
  if (parsed !== undefined)
    return { version: `b${parsed.build}-${parsed.commit}`, build: parsed.build, devices };
  const first = text
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '');
  return { version: first ?? 'unknown', devices };
}

/** The devices the build computes on (`CUDA0: NVIDIA L4 (…)`); empty for a CPU build or a GPU backend that did not load. */
export async function listDevices(bin: string, options: CheckOptions): Promise<string[]> {
  const r = await runOk(bin, ['--list-devices'], options);
  // The list is on stdout, backend logs on stderr: parsing both would read the logs that
  // follow the list as devices.
  return parseListDevices(r.stdout.includes('Available devices') ? r.stdout : r.stderr);
}

interface Ran {
  stdout: string;
  stderr: string;
}

function runOk(bin: string, args: string[], options: CheckOptions): Promise<Ran> {
  const env = { ...(options.env ?? engineEnv(process.env)) };
  Object.assign(env, llamaEnv(bin, env));
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      args,
      { env, timeout: options.timeoutMs, killSignal: 'SIGKILL', maxBuffer: 4 << 20, signal: options.signal },
      (error, stdout, stderr) => {
        if (error === null) {
          resolve({ stdout, stderr });
          return;
        }
        if (options.signal?.aborted === true) {
          // Node's AbortError, as the caller's own signal would give anywhere else.
          reject(error instanceof Error ? error : new Error(error.message));
          return;
        }
        let why: string;
        if (error.killed) why = `${args.join(' ')} gave no answer in ${options.timeoutMs / 1000} s`;
        else if (typeof error.code === 'string')
          why = `${error.code} (${error.message})`; // spawn failed: ENOENT, EACCES, ENOEXEC
        else
          why =
            tail(stderr) || tail(stdout) || `${args.join(' ')} exited ${String(error.code ?? error.signal)}`;
        reject(
          new LlmgwError(
            'unavailable',
            `${bin} does not run on this machine: ${why}; try another flavour or set ${setting.bin} to a llama-server that runs here`,
            { cause: error },
          ),
        );
      },
    );
  });
}

/** The end of a process's output: where the loader names the library it could not find. */
function tail(text: string): string {
  const t = text.trim();
  return t.length > 1000 ? `…${t.slice(-1000)}` : t;
}
