import { beforeAll, describe, expect, it } from 'vitest';

import { buildFakeNvml, fakeNvidiaSmi, useNvmlScenario, useSmiFixture } from '../../test/support/fake-gpu.js';
import { defaultDiscoveries, discoverGpus } from './discover.js';
import { NvidiaSmiDiscovery } from './nvidia-smi/nvidia-smi-discovery.js';
import { NvmlDiscovery } from './nvml/nvml-discovery.js';
import { DiscoveryError, type GpuDiscovery } from './types.js';

let library: string;
beforeAll(async () => {
  library = await buildFakeNvml();
});

/** A path that always fails with this error, or finds no cards under driver 1.0. */
function stub(method: GpuDiscovery['method'], failure?: Error): GpuDiscovery {
  return {
    method,
    discover: () =>
      failure === undefined ? Promise.resolve({ driver_version: '1.0', cards: [] }) : Promise.reject(failure),
  };
}

describe('discoverGpus', () => {
  it('takes NVML when it works, with no reasons', async () => {
    useNvmlScenario('whole-cards');
    useSmiFixture('a100x8-550');
    const inventory = await discoverGpus({
      nvml: new NvmlDiscovery({ library }),
      nvidiaSmi: new NvidiaSmiDiscovery({ binary: fakeNvidiaSmi }),
    });
    expect(inventory.method).toBe('nvml');
    expect(inventory.reasons).toEqual([]);
    expect(inventory.cards).toHaveLength(3);
    expect(inventory.driver_version).toBe('550.54.15');
  });

  it('falls back to nvidia-smi when the NVML library is missing, and says why', async () => {
    useSmiFixture('h100-mig-590');
    const inventory = await discoverGpus({
      nvml: new NvmlDiscovery({ library: '/nonexistent/libnvidia-ml.so.1' }),
      nvidiaSmi: new NvidiaSmiDiscovery({ binary: fakeNvidiaSmi }),
    });
    expect(inventory.method).toBe('nvidia-smi');
    expect(inventory.reasons).toHaveLength(1);
    expect(inventory.reasons[0]).toMatch(/^nvml: \/nonexistent\/libnvidia-ml\.so\.1 not found \(.+\)$/);
    expect(inventory.cards[0]?.instances).toHaveLength(3);
  });

  it('is a CPU-only node when neither path exists, with both reasons', async () => {
    const inventory = await discoverGpus({
      nvml: new NvmlDiscovery({ library: 'libnvidia-ml-llmgw-test.so.1' }),
      nvidiaSmi: new NvidiaSmiDiscovery({ binary: 'llmgw-no-such-nvidia-smi' }),
    });
    expect(inventory.method).toBe('none');
    expect(inventory.cards).toEqual([]);
    expect(inventory.reasons).toHaveLength(2);
    expect(inventory.reasons[0]).toMatch(/^nvml: libnvidia-ml-llmgw-test\.so\.1 not found \(/);
    expect(inventory.reasons[1]).toBe('nvidia-smi: not found on PATH');
    expect(inventory.driver_version).toBeUndefined();
  });

  it('tries nvidia-smi after a driver NVML cannot use, and is none when it fails too', async () => {
    useNvmlScenario('no-driver');
    useSmiFixture('no-driver');
    const inventory = await discoverGpus({
      nvml: new NvmlDiscovery({ library }),
      nvidiaSmi: new NvidiaSmiDiscovery({ binary: fakeNvidiaSmi }),
    });
    expect(inventory.method).toBe('none');
    expect(inventory.reasons[0]).toBe(
      'nvml: NVIDIA driver not loaded (nvmlInit_v2: Driver Not Loaded): load it (modprobe nvidia) or reinstall it',
    );
    expect(inventory.reasons[1]).toMatch(
      /^nvidia-smi: NVIDIA driver not loaded \(.*exited 9\): NVIDIA-SMI has failed/,
    );
  });

  it('uses nvidia-smi when NVML is unusable but nvidia-smi works', async () => {
    const inventory = await discoverGpus({
      nvml: stub('nvml', new DiscoveryError('unusable', 'NVIDIA driver not loaded')),
      nvidiaSmi: stub('nvidia-smi'),
    });
    expect(inventory).toEqual({
      method: 'nvidia-smi',
      reasons: ['nvml: NVIDIA driver not loaded'],
      driver_version: '1.0',
      cards: [],
    });
  });

  it('keeps going past a path that fails unexpectedly, saying so', async () => {
    const inventory = await discoverGpus({
      nvml: stub('nvml', new TypeError('boom')),
      nvidiaSmi: stub('nvidia-smi'),
    });
    expect(inventory.method).toBe('nvidia-smi');
    expect(inventory.reasons).toEqual(['nvml: failed unexpectedly: boom']);
  });

  it('is none with no reasons when given no paths', async () => {
    expect(await discoverGpus({})).toEqual({ method: 'none', reasons: [], cards: [] });
  });
});

describe('defaultDiscoveries', () => {
  it('builds both paths from LLMGW_NVML_LIBRARY and LLMGW_NVIDIA_SMI', async () => {
    useNvmlScenario('h100-mig');
    const paths = defaultDiscoveries({ LLMGW_NVML_LIBRARY: library, LLMGW_NVIDIA_SMI: fakeNvidiaSmi });
    expect([paths.nvml.method, paths.nvidiaSmi.method]).toEqual(['nvml', 'nvidia-smi']);
    const inventory = await discoverGpus(paths);
    expect(inventory.method).toBe('nvml');
    expect(inventory.cards[0]?.instances.map((i) => i.profile)).toEqual(['3g.40gb', '2g.20gb', '1g.10gb']);
  });

  it('goes to the configured nvidia-smi when the configured library is missing', async () => {
    useSmiFixture('a100x8-550');
    const inventory = await discoverGpus(
      defaultDiscoveries({
        LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
      }),
    );
    expect(inventory.method).toBe('nvidia-smi');
    expect(inventory.cards).toHaveLength(8);
  });

  it('defaults to libnvidia-ml.so.1 and nvidia-smi on PATH, reading empty values as unset', async () => {
    const paths = defaultDiscoveries({ LLMGW_NVML_LIBRARY: '', LLMGW_NVIDIA_SMI: '' });
    expect(paths.nvml).toBeInstanceOf(NvmlDiscovery);
    expect(paths.nvidiaSmi).toBeInstanceOf(NvidiaSmiDiscovery);
    // Found on a machine with NVIDIA's driver; elsewhere each reason names the default it looked for.
    const inventory = await discoverGpus(paths);
    if (inventory.method === 'none') {
      expect(inventory.reasons[0]).toMatch(
        /^nvml: (libnvidia-ml\.so\.1 not found \(|NVIDIA driver not loaded)/,
      );
      expect(inventory.reasons[1]).toMatch(/^nvidia-smi: (not found on PATH|NVIDIA driver not loaded)/);
    }
  });
});
