import { describe, expect, it } from 'vitest';

import type { Card, HostInfo } from '../gpu/types.js';

import {
  diagnose,
  doctorFindings,
  engineLine,
  llamaServerProbe,
  type DoctorCode,
  type EngineProbe,
  type PathResult,
} from './doctor.js';

const host: HostInfo = {
  hostname: 'h',
  os: 'linux',
  arch: 'x64',
  cpus: { count: 8, model: 'x' },
  memory: { total_mib: 1, free_mib: 1 },
  disk: { path: '/d', total_mib: 1, free_mib: 1 },
};
const card = (over: Partial<Card> = {}): Card => ({
  index: 0,
  uuid: 'GPU-1',
  name: 'NVIDIA A100-SXM4-80GB',
  class: 'a100-80g',
  pci_bus_id: '00000000:01:00.0',
  memory_total_mib: 81920,
  memory_used_mib: 0,
  utilization_pct: 3,
  wear: {},
  processes: [],
  instances: [],
  ...over,
});
const smi = (cards: Card[]): PathResult[] => [
  { method: 'nvml', ok: false, kind: 'missing', reason: 'libnvidia-ml.so.1 not found' },
  { method: 'nvidia-smi', ok: true, cards, driver_version: '550.54.15', cuda_version: '12.4' },
];
const llama = [{ name: 'llama-server', found: true, path: '/usr/bin/llama-server' }];

describe('llmgw doctor', () => {
  it('says which path works and why the other did not', () => {
    const r = diagnose({ paths: smi([card()]), engines: llama, host });
    expect(r.discovery).toEqual({ method: 'nvidia-smi', reasons: ['nvml: libnvidia-ml.so.1 not found'] });
    expect(r).toMatchObject({
      driver_version: '550.54.15',
      cuda_version: '12.4',
      exit_code: 0,
      warnings: [],
    });
    expect(r.cards[0]).toMatchObject({ mode: 'whole', utilization_pct: 3, instances: [] });
  });

  it.each([
    [
      { remapped_rows_pending: true },
      'gpu_reset_pending',
      'has remapped memory rows waiting for a reset: reset it (nvidia-smi -r -i 0) when it is idle',
    ],
    [
      { remapped_rows_failure: true },
      'gpu_remap_failed',
      'failed to remap a memory row: it needs service; drain it',
    ],
    [{ ecc_uncorrectable: 2 }, 'ecc_uncorrectable', 'has had 2 uncorrectable ECC errors'],
  ])('warns of wear %j without failing', (wear, code, words) => {
    const r = diagnose({ paths: smi([card({ wear })]), engines: llama, host });
    expect(r.exit_code).toBe(0);
    expect(r.warnings).toEqual([{ code, message: expect.stringContaining(words), blocking: false }]);
  });

  it('fails when the driver is installed but not loaded, on both paths', () => {
    const r = diagnose({
      paths: [
        {
          method: 'nvml',
          ok: false,
          kind: 'unusable',
          reason: 'NVIDIA driver not loaded (nvmlInit_v2: Driver Not Loaded)',
        },
        {
          method: 'nvidia-smi',
          ok: false,
          kind: 'unusable',
          reason: 'NVIDIA driver not loaded (nvidia-smi exited 9)',
        },
      ],
      engines: llama,
      host,
    });
    expect(r.exit_code).toBe(1);
    expect(r.discovery.method).toBe('none');
    expect(r.warnings[0]?.code).toBe('driver_not_loaded');
  });

  it('does not call a machine without NVIDIA software broken', () => {
    const r = diagnose({
      paths: [
        { method: 'nvml', ok: false, kind: 'missing', reason: 'libnvidia-ml.so.1 not found' },
        { method: 'nvidia-smi', ok: false, kind: 'missing', reason: 'not found on PATH' },
      ],
      engines: llama,
      host,
    });
    expect(r).toMatchObject({ exit_code: 0, warnings: [] });
  });

  it.each(Object.entries(doctorFindings))('%s means %s', (code, meaning) => {
    // The whole table, so a new finding cannot be added without saying whether the node can serve with it.
    const expected: Record<DoctorCode, 'cannot_serve' | 'notice'> = {
      driver_not_loaded: 'cannot_serve',
      mig_no_instances: 'cannot_serve',
      mig_pending_reset: 'cannot_serve',
      no_engine: 'cannot_serve',
      control_plane_unreachable: 'cannot_serve',
      token_refused: 'cannot_serve',
      container_daemon_unreachable: 'cannot_serve',
      container_gpu_runtime_missing: 'cannot_serve',
      gpu_reset_pending: 'notice',
      gpu_remap_failed: 'notice',
      ecc_uncorrectable: 'notice',
    };
    expect(meaning).toBe(expected[code as DoctorCode]);
  });

  const noGpu: PathResult[] = [
    { method: 'nvml', ok: false, kind: 'missing', reason: 'libnvidia-ml.so.1 not found' },
    { method: 'nvidia-smi', ok: false, kind: 'missing', reason: 'not found on PATH' },
  ];
  const installs: EngineProbe = {
    name: 'llama-server',
    found: false,
    installs: true,
    detail: 'not installed yet',
  };
  const missing: EngineProbe = {
    name: 'llama-server',
    found: false,
    detail: 'agent.engines.llamacpp.bin is /x, which does not exist or cannot run',
  };
  const vllm: EngineProbe = { name: 'vllm', found: true, path: '/usr/bin/vllm' };
  const up = { url: 'http://cp:8080', reachable: true, version: '1' };

  it.each([
    ['llama.cpp found, no GPU', { paths: noGpu, engines: llama }, [], 0],
    ['llama.cpp the agent installs, no GPU', { paths: noGpu, engines: [installs] }, [], 0],
    ['no llama.cpp and no GPU', { paths: noGpu, engines: [missing, vllm] }, ['no_engine'], 1],
    ['no llama.cpp, a GPU and vLLM', { paths: smi([card()]), engines: [missing, vllm] }, [], 0],
    [
      'no llama.cpp, a GPU and no GPU engine',
      { paths: smi([card()]), engines: [missing, { name: 'vllm', found: false }] },
      ['no_engine'],
      1,
    ],
    [
      'the control plane answers and takes the token',
      { paths: noGpu, engines: llama, controlPlane: { ...up, token: { accepted: true, name: 't' } } },
      [],
      0,
    ],
    [
      'the control plane does not answer',
      {
        paths: noGpu,
        engines: llama,
        controlPlane: { url: 'http://cp:8080', reachable: false, error: 'ECONNREFUSED' },
      },
      ['control_plane_unreachable'],
      1,
    ],
    [
      'the join token is refused',
      {
        paths: noGpu,
        engines: llama,
        controlPlane: { ...up, token: { accepted: false, error: 'the join token is not valid' } },
      },
      ['token_refused'],
      1,
    ],
    [
      'a worn card alone',
      { paths: smi([card({ wear: { ecc_uncorrectable: 1 } })]), engines: llama },
      ['ecc_uncorrectable'],
      0,
    ],
    [
      'a worn card and a refused token',
      {
        paths: smi([card({ wear: { ecc_uncorrectable: 1 } })]),
        engines: llama,
        controlPlane: { ...up, token: { accepted: false } },
      },
      ['ecc_uncorrectable', 'token_refused'],
      1,
    ],
  ] as const)('%s: warns %j, exits %i', (_, input, codes, exit) => {
    const r = diagnose({ ...input, host } as Parameters<typeof diagnose>[0]);
    expect(r.warnings.map((w) => w.code)).toEqual(codes);
    expect(r.exit_code).toBe(exit);
    for (const w of r.warnings) expect(w.blocking).toBe(doctorFindings[w.code] === 'cannot_serve');
  });

  it('says why nothing can run and what to set', () => {
    const r = diagnose({ paths: noGpu, engines: [missing], host });
    expect(r.warnings[0]?.message).toBe(
      'nothing can run on this node: llama-server: agent.engines.llamacpp.bin is /x, which does not exist or cannot run, and it has no GPU: set agent.engines.llamacpp.bin to a llama-server that runs here, or leave it unset on Linux x64 or arm64 for the agent to install llama.cpp',
    );
  });

  it('says what to set when no llama-server can run and the node has no GPU', () => {
    const none = llamaServerProbe({
      bin: undefined,
      binRuns: false,
      installed: undefined,
      onPath: undefined,
      platform: 'darwin',
      arch: 'arm64',
      key: 'b10587-cpu',
    });
    const r = diagnose({ paths: noGpu, engines: [none], host });
    expect(r.warnings.map((w) => w.code)).toEqual(['no_engine']);
    expect(r.warnings[0]?.message).toBe(
      'nothing can run on this node: no llama-server to run: the agent cannot install llama.cpp here (llama.cpp publishes builds the agent installs for Linux x64 and arm64 only, and this node is darwin arm64), none is configured and PATH has none: set agent.engines.llamacpp.bin to a llama-server, or put one on PATH',
    );
  });

  describe('llama-server as the agent will run it', () => {
    const installed = { bin: '/d/engines/llamacpp/b10587-cpu/llama-server', build: 'b10587', flavour: 'cpu' };
    const base = {
      bin: undefined,
      binRuns: false,
      installed: undefined,
      onPath: undefined,
      platform: 'linux',
      arch: 'x64',
      key: 'b10587-cpu',
    };
    it.each([
      [
        'installed by the agent',
        { installed, onPath: '/usr/bin/llama-server' },
        { found: true, path: installed.bin, source: 'installed' },
        `  llama-server  installed build b10587 (cpu) at ${installed.bin}`,
      ],
      [
        'installed by the agent, with a bin set: the installed build wins',
        { installed, bin: '/opt/llama-server', binRuns: true },
        { found: true, path: installed.bin, source: 'installed' },
        `  llama-server  installed build b10587 (cpu) at ${installed.bin}, which wins over the configured bin agent.engines.llamacpp.bin = /opt/llama-server (this node's settings)`,
      ],
      [
        'the bin set, and it runs',
        { bin: '/opt/llama-server', binRuns: true, onPath: '/usr/bin/llama-server' },
        { found: true, path: '/opt/llama-server', source: 'configured' },
        "  llama-server  configured: agent.engines.llamacpp.bin = /opt/llama-server (this node's settings); the agent installs nothing",
      ],
      [
        'the bin set, and missing',
        { bin: '/opt/llama-server' },
        { found: false, source: 'configured' },
        '  llama-server  not found (agent.engines.llamacpp.bin is /opt/llama-server, which does not exist or cannot run)',
      ],
      [
        'not installed, on Linux x64: the agent installs it',
        {},
        { found: false, installs: true, source: 'install' },
        '  llama-server  not installed yet: the agent installs llama.cpp b10587-cpu when a llama.cpp replica is placed here; PATH has no llama-server to fall back on',
      ],
      [
        'not installed, on Linux arm64',
        { arch: 'arm64', key: 'b10587-cpu' },
        { found: false, installs: true, source: 'install' },
        '  llama-server  not installed yet: the agent installs llama.cpp b10587-cpu when a llama.cpp replica is placed here; PATH has no llama-server to fall back on',
      ],
      [
        'on PATH too: the agent installs its own first, and falls back on it',
        { onPath: '/usr/bin/llama-server' },
        { found: false, installs: true, source: 'install' },
        '  llama-server  not installed yet: the agent installs llama.cpp b10587-cpu when a llama.cpp replica is placed here; should that fail, it runs /usr/bin/llama-server from PATH',
      ],
      [
        'on macOS, from PATH',
        { platform: 'darwin', arch: 'arm64', onPath: '/opt/homebrew/bin/llama-server' },
        { found: true, path: '/opt/homebrew/bin/llama-server', source: 'path' },
        '  llama-server  from PATH: /opt/homebrew/bin/llama-server (nothing installed or configured; the agent cannot install llama.cpp here (llama.cpp publishes builds the agent installs for Linux x64 and arm64 only, and this node is darwin arm64))',
      ],
      [
        'on macOS, with none',
        { platform: 'darwin', arch: 'arm64' },
        { found: false, source: 'none' },
        '  llama-server  no llama-server to run: the agent cannot install llama.cpp here (llama.cpp publishes builds the agent installs for Linux x64 and arm64 only, and this node is darwin arm64), none is configured and PATH has none: set agent.engines.llamacpp.bin to a llama-server, or put one on PATH',
      ],
    ] as const)('%s', (_, over, expected, line) => {
      const probe = llamaServerProbe({ ...base, ...over });
      expect(probe).toMatchObject({ name: 'llama-server', ...expected });
      if (!('installs' in expected)) expect(probe.installs).toBeUndefined();
      expect(engineLine(probe)).toBe(line);
    });

    it('keeps the line of other engines', () => {
      expect(engineLine({ name: 'vllm', found: true, path: '/usr/bin/vllm' })).toBe(
        '  vllm          found: /usr/bin/vllm',
      );
      expect(engineLine({ name: 'vllm', found: false, detail: 'not on PATH' })).toBe(
        '  vllm          not found (not on PATH)',
      );
    });
  });
});
