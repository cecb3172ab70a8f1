import { describe, expect, it } from 'vitest';

import type { Card, HostInfo } from '../gpu/types.js';

import { diagnose, type PathResult } from './doctor.js';

const host: HostInfo = { hostname: 'h', os: 'linux', arch: 'x64', cpus: { count: 8, model: 'x' }, memory: { total_mib: 1, free_mib: 1 }, disk: { path: '/d', total_mib: 1, free_mib: 1 } };
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
    expect(r).toMatchObject({ driver_version: '550.54.15', cuda_version: '12.4', exit_code: 0, warnings: [] });
    expect(r.cards[0]).toMatchObject({ mode: 'whole', utilization_pct: 3, instances: [] });
  });

  it.each([
    [{ remapped_rows_pending: true }, 'gpu_reset_pending', 'has remapped memory rows waiting for a reset: reset it (nvidia-smi -r -i 0) when it is idle'],
    [{ remapped_rows_failure: true }, 'gpu_remap_failed', 'failed to remap a memory row: it needs service; drain it'],
    [{ ecc_uncorrectable: 2 }, 'ecc_uncorrectable', 'has had 2 uncorrectable ECC errors'],
  ])('warns of wear %j without failing', (wear, code, words) => {
    const r = diagnose({ paths: smi([card({ wear })]), engines: llama, host });
    expect(r.exit_code).toBe(0);
    expect(r.warnings).toEqual([{ code, message: expect.stringContaining(words) }]);
  });

  it('fails when the driver is installed but not loaded, on both paths', () => {
    const r = diagnose({
      paths: [
        { method: 'nvml', ok: false, kind: 'unusable', reason: 'NVIDIA driver not loaded (nvmlInit_v2: Driver Not Loaded)' },
        { method: 'nvidia-smi', ok: false, kind: 'unusable', reason: 'NVIDIA driver not loaded (nvidia-smi exited 9)' },
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
});
