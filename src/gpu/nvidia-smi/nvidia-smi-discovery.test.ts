import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { fakeNvidiaSmi, useSmiFixture } from '../../../test/support/fake-gpu.js';
import { naEverywhereCards } from '../../../test/support/gpu-expectations.js';
import { devicesOf } from '../devices.js';
import { DiscoveryError } from '../types.js';
import { NvidiaSmiDiscovery, smiFailure } from './nvidia-smi-discovery.js';

const scratch = mkdtempSync(join(tmpdir(), 'llmgw-smi-'));
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A one-off executable for failures the fixtures do not cover. */
function script(name: string, body: string, mode = 0o755): string {
  const path = join(scratch, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, mode);
  return path;
}

async function refusal(discovery: NvidiaSmiDiscovery): Promise<DiscoveryError> {
  const error: unknown = await discovery.discover().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DiscoveryError);
  return error as DiscoveryError;
}

const smi = new NvidiaSmiDiscovery({ binary: fakeNvidiaSmi });

describe('NvidiaSmiDiscovery against the fake nvidia-smi', () => {
  it('reports an H100 in MIG mode as its instances (driver 590)', async () => {
    useSmiFixture('h100-mig-590');
    const found = await smi.discover();
    expect(smi.method).toBe('nvidia-smi');
    expect(found).toMatchObject({ driver_version: '590.48.01', cuda_version: '13.1' });
    const { devices, excluded } = devicesOf(found.cards);
    expect(excluded).toEqual([]);
    expect(devices.map((d) => [d.id, d.label, d.class, d.uuid, d.memory_total_mib])).toEqual([
      [1000, '0/mig0', 'h100-80g-mig-3g.40gb', 'MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c', 40448],
      [1001, '0/mig1', 'h100-80g-mig-2g.20gb', 'MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4', 20096],
      [1002, '0/mig2', 'h100-80g-mig-1g.10gb', 'MIG-7c1f0b9e-4d2a-5b7e-8f31-0a6c2e9d4b15', 9984],
    ]);
    expect(devices.map((d) => d.processes.map((p) => p.pid))).toEqual([[21198], [], []]);
    expect(
      devices.every((d) => d.temperature_c === 52 && d.power_w === 433.78 && d.utilization_pct === undefined),
    ).toBe(true);
  });

  it('reports eight whole A100s with their processes (driver 550)', async () => {
    useSmiFixture('a100x8-550');
    const found = await smi.discover();
    const { devices } = devicesOf(found.cards);
    expect(devices.map((d) => d.label)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);
    expect(new Set(devices.map((d) => d.class))).toEqual(new Set(['a100-80g']));
    expect(devices.map((d) => d.processes.length)).toEqual([2, 1, 1, 1, 0, 0, 0, 0]);
    expect(found.cards[5]?.wear.remapped_rows_pending).toBe(true);
  });

  it('reads an old driver: unprefixed names, MIG-GPU-… UUIDs, <power_readings> (driver 460)', async () => {
    useSmiFixture('old-460');
    const found = await smi.discover();
    expect(found.driver_version).toBe('460.73.01');
    const { devices } = devicesOf(found.cards);
    expect(devices.map((d) => [d.label, d.class, d.uuid])).toEqual([
      ['0/mig0', 'a100-40g-mig-3g.20gb', 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0'],
      ['0/mig1', 'a100-40g-mig-2g.10gb', 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/5/0'],
      ['1', 't4-16g', 'GPU-a2c6e1d4-7f3b-8e9a-1c5d-6b4f2e8a9c03'],
    ]);
    expect(found.cards[0]?.power_w).toBe(36.85);
    expect(found.cards[1]?.wear).toEqual({ ecc_uncorrectable: 0, retired_pages: 3 });
  });

  it('keeps a card in MIG mode with nothing carved out of placement, with the reason', async () => {
    useSmiFixture('mig-none-carved');
    const { devices, excluded } = devicesOf((await smi.discover()).cards);
    expect(devices.map((d) => d.label)).toEqual(['1']);
    expect(excluded).toEqual([
      {
        card: 0,
        uuid: 'GPU-0e7c5a91-2b3d-4f6e-9a8b-7c6d5e4f3a21',
        class: 'a100-80g',
        reason:
          'MIG mode with no instances carved: create some (nvidia-smi mig -i 0 -cgi 9,9 -C) or turn MIG off (nvidia-smi -i 0 -mig 0)',
      },
    ]);
  });

  it('keeps cards whose MIG mode waits for a reset out of placement', async () => {
    useSmiFixture('mig-pending');
    const { devices, excluded } = devicesOf((await smi.discover()).cards);
    expect(devices).toEqual([]);
    expect(excluded.map((e) => e.reason)).toEqual([
      'MIG mode change to enabled waits for a GPU reset: reset it (nvidia-smi -r -i 0) or reboot',
      'MIG mode change to disabled waits for a GPU reset: reset it (nvidia-smi -r -i 1) or reboot',
    ]);
  });

  it('reads a card that says N/A everywhere as one without those readings', async () => {
    useSmiFixture('na-everywhere');
    const found = await smi.discover();
    expect(found.cards).toEqual(naEverywhereCards);
  });

  it('reads compute-instance profiles (driver 575)', async () => {
    useSmiFixture('h200-compute-instances');
    const { devices } = devicesOf((await smi.discover()).cards);
    expect(devices.map((d) => [d.id, d.label, d.class])).toEqual([
      [0, '0', 'h200-141g'],
      [1100, '1/mig0', 'h200-141g-mig-1c.3g.71gb'],
      [1101, '1/mig1', 'h200-141g-mig-2c.3g.71gb'],
    ]);
  });

  it('refuses when the driver is not loaded (exit 9), quoting nvidia-smi', async () => {
    useSmiFixture('no-driver');
    const error = await refusal(smi);
    expect(error.kind).toBe('unusable');
    expect(error.message).toMatch(
      /^NVIDIA driver not loaded \(.*nvidia-smi (-L|-q -x) exited 9\): NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\. Make sure that the latest NVIDIA driver is installed and running\.$/,
    );
  });

  it('says a binary that is not on PATH is missing', async () => {
    const error = await refusal(new NvidiaSmiDiscovery({ binary: 'llmgw-no-such-nvidia-smi' }));
    expect([error.kind, error.message]).toEqual(['missing', 'not found on PATH']);
  });

  it('names a configured path that is not there', async () => {
    const error = await refusal(new NvidiaSmiDiscovery({ binary: '/nonexistent/nvidia-smi' }));
    expect([error.kind, error.message]).toEqual(['missing', '/nonexistent/nvidia-smi not found']);
  });

  it('says a file that cannot run is not executable', async () => {
    const path = script('not-executable', 'exit 0', 0o644);
    const error = await refusal(new NvidiaSmiDiscovery({ binary: path }));
    expect([error.kind, error.message]).toEqual(['unusable', `${path} is not executable`]);
  });

  it('gives up on a run that hangs', async () => {
    const path = script('hangs', 'exec sleep 10');
    const error = await refusal(new NvidiaSmiDiscovery({ binary: path, timeoutMs: 200 }));
    expect(error.kind).toBe('unusable');
    expect(error.message).toMatch(/^.*hangs (-L|-q -x) did not answer within 0\.2 s$/);
  });

  it('refuses output that is not its XML', async () => {
    const path = script(
      'garbage',
      'if [ "$1" = "-L" ]; then echo "GPU 0: NVIDIA L4 (UUID: GPU-1)"; else echo "not xml"; fi',
    );
    const error = await refusal(new NvidiaSmiDiscovery({ binary: path }));
    expect(error.kind).toBe('unusable');
    expect(error.message).toBe(
      `${path} -q -x printed something other than its XML: no <nvidia_smi_log> element`,
    );
  });

  it('reports any other exit with what it printed', async () => {
    const path = script(
      'fails',
      'echo "Unable to determine the device handle for GPU0000:4F:00.0: Unknown Error" >&2; exit 255',
    );
    const error = await refusal(new NvidiaSmiDiscovery({ binary: path }));
    expect(error.kind).toBe('unusable');
    expect(error.message).toMatch(
      /^.*fails (-L|-q -x) exited 255: Unable to determine the device handle for GPU0000:4F:00\.0: Unknown Error$/,
    );
  });
});

describe('smiFailure', () => {
  const base = { binary: 'nvidia-smi', args: ['-L'], output: '', timeoutMs: 15_000 };

  it.each([
    [12, 'NVML library not found (nvidia-smi -L exited 12)'],
    [15, 'a GPU fell off the bus (nvidia-smi -L exited 15)'],
    [6, 'nvidia-smi -L exited 6'],
  ])('explains exit %i', (code, message) => {
    const error = smiFailure({ ...base, error: Object.assign(new Error('Command failed'), { code }) });
    expect([error.kind, error.message]).toEqual(['unusable', message]);
  });

  it('keeps long output to one short line', () => {
    const error = smiFailure({ ...base, error: { code: 2 }, output: `${'x'.repeat(400)}\n\n` });
    expect(error.message.length).toBeLessThan(340);
    expect(error.message.endsWith('...')).toBe(true);
  });

  it('reports a failure with neither exit code nor errno', () => {
    const error = smiFailure({ ...base, error: new Error('spawn failed') });
    expect(error.message).toBe('nvidia-smi -L failed: spawn failed');
  });
});
