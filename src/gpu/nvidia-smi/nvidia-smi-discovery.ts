import { execFile } from 'node:child_process';

import { DiscoveryError, type GpuDiscovery, type GpuInventory } from '../types.js';
import { joinSmi, type JoinedSmi } from './join-smi.js';
import { parseSmiList } from './parse-list.js';
import { parseSmiQuery, SmiQueryFormatError } from './parse-query.js';

export interface NvidiaSmiOptions {
  /** The executable: a path, or a name looked up on PATH. Default `nvidia-smi`. */
  binary?: string;
  /** Per run. nvidia-smi hangs rather than fails on some broken cards. Default 15 s. */
  timeoutMs?: number;
}

/** The exit codes nvidia-smi documents (man nvidia-smi, RETURN VALUE) that mean a broken driver. */
const exitMeaning: Readonly<Record<number, string>> = {
  9: 'NVIDIA driver not loaded',
  12: 'NVML library not found',
  15: 'a GPU fell off the bus',
};

/** GPU discovery by running `nvidia-smi -L` and `nvidia-smi -q -x`. */
export class NvidiaSmiDiscovery implements GpuDiscovery {
  readonly method = 'nvidia-smi';
  readonly #binary: string;
  readonly #timeoutMs: number;

  constructor(options: NvidiaSmiOptions = {}) {
    this.#binary = options.binary === undefined || options.binary === '' ? 'nvidia-smi' : options.binary;
    this.#timeoutMs = options.timeoutMs ?? 15_000;
  }

  async discover(): Promise<Omit<GpuInventory, 'method' | 'reasons'>> {
    let joined = await this.#once();
    // Instances carved or destroyed between the two runs show in only one of them: look
    // again once before leaving those out.
    if (joined.unmatched.length > 0) joined = await this.#once();
    const { unmatched: _unmatched, ...inventory } = joined;
    return inventory;
  }

  async #once(): Promise<JoinedSmi> {
    const [list, xml] = await Promise.all([this.#run(['-L']), this.#run(['-q', '-x'])]);
    try {
      return joinSmi(parseSmiList(list), parseSmiQuery(xml));
    } catch (e) {
      if (e instanceof SmiQueryFormatError) {
        throw new DiscoveryError(
          'unusable',
          `${this.#binary} -q -x printed something other than its XML: ${e.message}`,
        );
      }
      throw e;
    }
  }

  #run(args: readonly string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        this.#binary,
        args,
        { timeout: this.#timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve(stdout);
            return;
          }
          reject(
            smiFailure({
              binary: this.#binary,
              args,
              error,
              output: `${stdout}\n${stderr}`,
              timeoutMs: this.#timeoutMs,
            }),
          );
        },
      );
    });
  }
}

export interface SmiFailure {
  binary: string;
  args: readonly string[];
  error: unknown;
  /** What it printed, stdout and stderr: nvidia-smi writes its failures to stdout. */
  output: string;
  timeoutMs: number;
}

/** A failed run, as the DiscoveryError that says why in an operator's words. */
export function smiFailure(failure: SmiFailure): DiscoveryError {
  const { binary, error } = failure;
  const command = [binary, ...failure.args].join(' ');
  const code = field(error, 'code');
  if (code === 'ENOENT') {
    return new DiscoveryError('missing', binary.includes('/') ? `${binary} not found` : 'not found on PATH');
  }
  if (code === 'EACCES') return new DiscoveryError('unusable', `${binary} is not executable`);
  const said = firstLines(failure.output);
  if (field(error, 'killed') === true && typeof code !== 'number') {
    return new DiscoveryError('unusable', `${command} did not answer within ${failure.timeoutMs / 1000} s`);
  }
  if (typeof code === 'number') {
    const meaning = exitMeaning[code];
    const head =
      meaning === undefined ? `${command} exited ${code}` : `${meaning} (${command} exited ${code})`;
    return new DiscoveryError('unusable', said === '' ? head : `${head}: ${said}`);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new DiscoveryError('unusable', `${command} failed: ${message}`);
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

/** The gist of what it printed, on one line and short enough for a status view. */
function firstLines(output: string): string {
  const joined = output
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .join(' ');
  return joined.length > 300 ? `${joined.slice(0, 297)}...` : joined;
}
