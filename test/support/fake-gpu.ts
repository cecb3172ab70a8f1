import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import koffi from 'koffi';

/**
 * The fakes of what a machine without NVIDIA GPUs lacks: an `nvidia-smi` that prints
 * captured output, and a `libnvidia-ml.so.1` built from C that answers NVML calls from a
 * scenario file. See test/fakes/nvml/scenarios/README.md and test/fakes/nvidia-smi/.
 */

/** The fake executable; FAKE_NVIDIA_SMI_FIXTURE picks what it prints. */
export const fakeNvidiaSmi = fileURLToPath(new URL('../fakes/nvidia-smi/nvidia-smi', import.meta.url));

const nvmlSource = fileURLToPath(new URL('../fakes/nvml/fake-nvml.c', import.meta.url));

/** A fixture folder name under test/fakes/nvidia-smi/fixtures. */
export type SmiFixture =
  | 'h100-mig-590'
  | 'a100x8-550'
  | 'old-460'
  | 'mig-none-carved'
  | 'mig-pending'
  | 'na-everywhere'
  | 'h200-compute-instances'
  | 'no-driver';

/** A scenario file name (without `.txt`) under test/fakes/nvml/scenarios. */
export type NvmlScenario =
  | 'whole-cards'
  | 'h100-mig'
  | 'h200-compute-instances'
  | 'mig-none-carved'
  | 'mig-pending'
  | 'na-everywhere'
  | 'profile-from-attributes'
  | 'no-driver';

export function smiFixtureFile(fixture: SmiFixture, file: 'list.txt' | 'query.xml'): string {
  return readFileSync(
    fileURLToPath(new URL(`../fakes/nvidia-smi/fixtures/${fixture}/${file}`, import.meta.url)),
    'utf8',
  );
}

/** Makes the fake nvidia-smi print this fixture (it reads the variable at each run). */
export function useSmiFixture(fixture: SmiFixture): void {
  process.env['FAKE_NVIDIA_SMI_FIXTURE'] = fixture;
}

/**
 * Makes the fake NVML report this scenario from its next nvmlInit_v2. process.env writes
 * reach the C library's getenv: Node sets the process's real environment.
 */
export function useNvmlScenario(scenario: NvmlScenario): void {
  process.env['FAKE_NVML_SCENARIO'] = nvmlScenarioFile(scenario);
}

/** The scenario file, for FAKE_NVML_SCENARIO in a child process's environment. */
export function nvmlScenarioFile(scenario: NvmlScenario): string {
  return fileURLToPath(new URL(`../fakes/nvml/scenarios/${scenario}.txt`, import.meta.url));
}

let built: Promise<string> | undefined;

/**
 * Compiles fake-nvml.c into a `libnvidia-ml.so.1` and returns its path: once per process,
 * and kept under the OS temp dir by the source's hash, so parallel test workers and later
 * runs share one build.
 */
export function buildFakeNvml(): Promise<string> {
  built ??= compile();
  return built;
}

async function compile(): Promise<string> {
  const source = readFileSync(nvmlSource);
  const hash = createHash('sha256').update(source).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `llmgw-fake-nvml-${hash}`);
  const library = join(dir, 'libnvidia-ml.so.1');
  if (existsSync(library)) return library;
  mkdirSync(dir, { recursive: true });
  // Built beside the target and renamed into place, so a worker never loads a half-written file.
  const partial = join(dir, `libnvidia-ml.so.1.${process.pid}.tmp`);
  await new Promise<void>((resolve, reject) => {
    execFile(
      'gcc',
      ['-shared', '-fPIC', '-O1', '-Wall', '-o', partial, nvmlSource],
      (error, _stdout, stderr) => {
        if (error === null) resolve();
        else
          reject(
            new Error(
              `gcc could not build the fake NVML (the GPU tests need gcc): ${error.message}\n${stderr}`,
            ),
          );
      },
    );
  });
  renameSync(partial, library);
  return library;
}

/** How many nvmlInit_v2 calls the fake has not seen shut down: 0 after a clean discovery. */
export function fakeNvmlInitDepth(library: string): number {
  const depth = koffi.load(library).func('int fake_nvml_init_depth(void)') as unknown as () => number;
  return depth();
}
