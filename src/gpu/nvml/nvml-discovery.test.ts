import { fileURLToPath } from 'node:url';

import { beforeAll, describe, expect, it } from 'vitest';

import { buildFakeNvml, fakeNvmlInitDepth, useNvmlScenario } from '../../../test/support/fake-gpu.js';
import { mixedMigH100Instances, naEverywhereCards } from '../../../test/support/gpu-expectations.js';
import { devicesOf } from '../devices.js';
import { DiscoveryError, type GpuInventory } from '../types.js';
import { nvmlReturn, type NvmlApi, type NvmlResult } from './nvml-api.js';
import { cudaVersionText, NvmlDiscovery } from './nvml-discovery.js';

let library: string;
beforeAll(async () => {
  library = await buildFakeNvml();
});

type Found = Omit<GpuInventory, 'method' | 'reasons'>;

/** Discovery through koffi against the fake libnvidia-ml.so.1, which must be left shut down. */
async function discover(scenario: Parameters<typeof useNvmlScenario>[0]): Promise<Found> {
  useNvmlScenario(scenario);
  const found = await new NvmlDiscovery({ library }).discover();
  expect(fakeNvmlInitDepth(library)).toBe(0);
  return found;
}

async function refusal(discovery: NvmlDiscovery): Promise<DiscoveryError> {
  const error: unknown = await discovery.discover().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DiscoveryError);
  return error as DiscoveryError;
}

describe('NvmlDiscovery through koffi against the fake NVML', () => {
  it('reads whole cards: memory past 4 GiB, power in watts, wear, processes with names', async () => {
    const found = await discover('whole-cards');
    expect(found.driver_version).toBe('550.54.15');
    expect(found.cuda_version).toBe('12.4');
    const [first, second, t4] = found.cards;
    expect(first).toEqual({
      index: 0,
      uuid: 'GPU-01f0c2d3-5e6f-4a7b-8c9d-0e1f2a3b4c50',
      name: 'NVIDIA A100-SXM4-80GB',
      class: 'a100-80g',
      pci_bus_id: '00000000:07:00.0',
      memory_total_mib: 81920,
      memory_used_mib: 73558,
      temperature_c: 31,
      power_w: 312.45,
      power_limit_w: 400,
      utilization_pct: 93,
      wear: {
        ecc_uncorrectable: 0,
        remapped_rows_uncorrectable: 0,
        remapped_rows_pending: false,
        remapped_rows_failure: false,
      },
      mig: { current: false, pending: false },
      processes: [
        { pid: 31000, name: '/usr/bin/python3', memory_mib: 72530 },
        { pid: 31100, name: 'llama-server', memory_mib: 1024 },
      ],
      instances: [],
    });
    expect(second?.wear).toEqual({
      ecc_uncorrectable: 2,
      remapped_rows_uncorrectable: 2,
      remapped_rows_pending: true,
      remapped_rows_failure: false,
    });
    expect(t4).toMatchObject({
      class: 't4-16g',
      pci_bus_id: '00000000:AF:00.0',
      wear: { ecc_uncorrectable: 1, retired_pages: 3 },
    });
    expect(t4?.mig).toBeUndefined();
    expect(devicesOf(found.cards).devices.map((d) => d.label)).toEqual(['0', '1', '2']);
  });

  it('reads a card in MIG mode as its instances, with processes per MIG handle', async () => {
    const found = await discover('h100-mig');
    expect(found.cuda_version).toBe('13.1');
    const [h100] = found.cards;
    expect(h100?.mig).toEqual({ current: true, pending: true });
    expect(h100?.processes).toEqual([]);
    expect(h100 !== undefined && 'utilization_pct' in h100).toBe(false);
    // Handle slot 2 is empty: the instance in slot 3 is Device 2, as nvidia-smi -L numbers it.
    expect(h100?.instances).toEqual(mixedMigH100Instances);
    const { devices } = devicesOf(found.cards);
    expect(devices.map((d) => [d.id, d.label, d.class, d.temperature_c, d.power_w])).toEqual([
      [1000, '0/mig0', 'h100-80g-mig-3g.40gb', 52, 433.78],
      [1001, '0/mig1', 'h100-80g-mig-2g.20gb', 52, 433.78],
      [1002, '0/mig2', 'h100-80g-mig-1g.10gb', 52, 433.78],
    ]);
  });

  it('reads compute instances that share a GPU instance', async () => {
    const found = await discover('h200-compute-instances');
    const { devices } = devicesOf(found.cards);
    expect(
      devices.map((d) => [
        d.label,
        d.class,
        d.mig?.gpu_instance_id,
        d.mig?.compute_instance_id,
        d.processes.length,
      ]),
    ).toEqual([
      ['0', 'h200-141g', undefined, undefined, 1],
      ['1/mig0', 'h200-141g-mig-1c.3g.71gb', 1, 0, 0],
      ['1/mig1', 'h200-141g-mig-2c.3g.71gb', 1, 1, 1],
    ]);
  });

  it('keeps a card in MIG mode with nothing carved out of placement', async () => {
    const { devices, excluded } = devicesOf((await discover('mig-none-carved')).cards);
    expect(devices.map((d) => d.label)).toEqual(['1']);
    expect(excluded.map((e) => [e.card, e.reason])).toEqual([
      [
        0,
        'MIG mode with no instances carved: create some (nvidia-smi mig -i 0 -cgi 9,9 -C) or turn MIG off (nvidia-smi -i 0 -mig 0)',
      ],
    ]);
  });

  it('keeps cards whose MIG mode waits for a reset out of placement', async () => {
    const found = await discover('mig-pending');
    expect(found.cards.map((c) => c.mig)).toEqual([
      { current: false, pending: true },
      { current: true, pending: false },
    ]);
    expect(devicesOf(found.cards).excluded.map((e) => e.reason)).toEqual([
      'MIG mode change to enabled waits for a GPU reset: reset it (nvidia-smi -r -i 0) or reboot',
      'MIG mode change to disabled waits for a GPU reset: reset it (nvidia-smi -r -i 1) or reboot',
    ]);
  });

  it('leaves out every reading the card does not support', async () => {
    const found = await discover('na-everywhere');
    expect(found.cards).toEqual(naEverywhereCards);
  });

  it('works out profiles from slices and memory when MIG names do not carry them', async () => {
    const [card] = (await discover('profile-from-attributes')).cards;
    expect(card?.instances.map((i) => [i.index, i.profile, i.gpu_instance_id])).toEqual([
      [0, '3g.40gb', 1],
      [1, '1g.10gb+me', 13],
    ]);
  });

  it('refuses when the driver is not loaded', async () => {
    useNvmlScenario('no-driver');
    const error = await refusal(new NvmlDiscovery({ library }));
    expect([error.kind, error.message]).toEqual([
      'unusable',
      'NVIDIA driver not loaded (nvmlInit_v2: Driver Not Loaded): load it (modprobe nvidia) or reinstall it',
    ]);
    expect(fakeNvmlInitDepth(library)).toBe(0);
  });

  it('says a library that is not there is missing', async () => {
    const error = await refusal(new NvmlDiscovery({ library: '/nonexistent/libnvidia-ml.so.1' }));
    expect(error.kind).toBe('missing');
    expect(error.message).toMatch(/^\/nonexistent\/libnvidia-ml\.so\.1 not found \(.+\)$/);
  });

  it('names the library it looked for by name', async () => {
    const error = await refusal(new NvmlDiscovery({ library: 'libnvidia-ml-llmgw-test.so.1' }));
    expect(error.message).toMatch(/^libnvidia-ml-llmgw-test\.so\.1 not found \(/);
  });

  it('says a file that is not a library did not load', async () => {
    const notLibrary = fileURLToPath(new URL('../../../test/fakes/nvml/fake-nvml.c', import.meta.url));
    const error = await refusal(new NvmlDiscovery({ library: notLibrary }));
    expect(error.kind).toBe('missing');
    expect(error.message.startsWith(`${notLibrary} did not load (`)).toBe(true);
  });

  it('reports any other init failure with NVML’s words', async () => {
    process.env['FAKE_NVML_SCENARIO'] = '/nonexistent/scenario.txt';
    const error = await refusal(new NvmlDiscovery({ library }));
    expect([error.kind, error.message]).toEqual(['unusable', 'nvmlInit_v2: Unknown Error (999)']);
  });

  it('runs overlapping discoveries one after the other', async () => {
    useNvmlScenario('whole-cards');
    const nvml = new NvmlDiscovery({ library });
    const results = await Promise.all([nvml.discover(), nvml.discover(), nvml.discover()]);
    expect(results.map((r) => r.cards.length)).toEqual([3, 3, 3]);
    expect(fakeNvmlInitDepth(library)).toBe(0);
  });
});

describe('NvmlDiscovery with an NvmlApi of the test’s own', () => {
  const no = (rc: number): NvmlResult<never> => ({ ok: false, rc });
  const yes = <T>(value: T): NvmlResult<T> => ({ ok: true, value });

  /** One H100 in MIG mode with one instance; every reading not listed is NOT_SUPPORTED. */
  function api(overrides: Partial<NvmlApi>, calls: string[]): NvmlApi {
    const unsupported = no(nvmlReturn.notSupported);
    const card = { kind: 'card' };
    const mig = { kind: 'mig' };
    const base: NvmlApi = {
      init: () => {
        calls.push('init');
        return Promise.resolve(0);
      },
      shutdown: () => {
        calls.push('shutdown');
        return 0;
      },
      errorString: (rc) => (rc === nvmlReturn.gpuIsLost ? 'GPU is lost' : `error ${rc}`),
      driverVersion: () => unsupported,
      cudaDriverVersion: () => unsupported,
      deviceCount: () => yes(1),
      handleByIndex: () => yes(card),
      name: (h) => yes(h === mig ? 'NVIDIA H100 80GB HBM3 MIG 7g.80gb' : 'NVIDIA H100 80GB HBM3'),
      uuid: (h) => yes(h === mig ? 'MIG-1' : 'GPU-1'),
      pciBusId: () => yes('00000000:01:00.0'),
      memory: (h) =>
        yes(
          h === mig
            ? { totalBytes: 80896 * 2 ** 20, usedBytes: 0 }
            : { totalBytes: 81559 * 2 ** 20, usedBytes: 0 },
        ),
      temperature: () => unsupported,
      powerUsage: () => unsupported,
      enforcedPowerLimit: () => unsupported,
      gpuUtilization: () => unsupported,
      eccUncorrected: () => unsupported,
      retiredPages: () => unsupported,
      remappedRows: () => unsupported,
      computeProcesses: (h) =>
        h === mig
          ? no(nvmlReturn.noPermission)
          : yes([
              { pid: 7, usedBytes: 2 ** 30, gpuInstanceId: 0, computeInstanceId: 0 },
              { pid: 8, usedBytes: undefined, gpuInstanceId: 5, computeInstanceId: 0 },
            ]),
      processName: (pid) => (pid === 7 ? yes('vllm') : no(nvmlReturn.notFound)),
      migMode: () => yes({ current: true, pending: true }),
      maxMigDeviceCount: () => yes(7),
      migDeviceByIndex: (_h, index) => (index === 0 ? yes(mig) : no(nvmlReturn.notFound)),
      gpuInstanceId: () => yes(0),
      computeInstanceId: () => yes(0),
      migAttributes: () => unsupported,
    };
    return { ...base, ...overrides };
  }

  it("splits the card's process list by GI/CI when a MIG handle refuses its own", async () => {
    const calls: string[] = [];
    const nvml = new NvmlDiscovery({ open: () => Promise.resolve(api({}, calls)) });
    const { cards } = await nvml.discover();
    expect(cards[0]?.instances[0]?.processes).toEqual([{ pid: 7, name: 'vllm', memory_mib: 1024 }]);
    expect(calls).toEqual(['init', 'shutdown']);
  });

  it('shuts NVML down when reading fails, and says why', async () => {
    const calls: string[] = [];
    const nvml = new NvmlDiscovery({
      open: () => Promise.resolve(api({ deviceCount: () => no(nvmlReturn.gpuIsLost) }, calls)),
    });
    const error = await refusal(nvml);
    expect([error.kind, error.message]).toEqual(['unusable', 'nvmlDeviceGetCount_v2: GPU is lost (15)']);
    expect(calls).toEqual(['init', 'shutdown']);
  });

  it('leaves out a card NVML cannot open, keeping the others’ indexes', async () => {
    const calls: string[] = [];
    const nvml = new NvmlDiscovery({
      open: () =>
        Promise.resolve(
          api(
            {
              deviceCount: () => yes(2),
              handleByIndex: (i) => (i === 0 ? no(nvmlReturn.gpuIsLost) : yes({ kind: 'card' })),
              migMode: () => no(nvmlReturn.notSupported),
              computeProcesses: () => yes([]),
            },
            calls,
          ),
        ),
    });
    const { cards } = await nvml.discover();
    expect(cards.map((c) => [c.index, c.class])).toEqual([[1, 'h100-80g']]);
  });

  it('skips a MIG device whose profile it cannot tell', async () => {
    const nvml = new NvmlDiscovery({
      open: () => Promise.resolve(api({ name: () => yes('NVIDIA H100 80GB HBM3') }, [])),
    });
    const { cards } = await nvml.discover();
    expect(cards[0]?.instances).toEqual([]);
  });

  it('refuses a caller without access to the devices', async () => {
    const nvml = new NvmlDiscovery({
      open: () => Promise.resolve(api({ init: () => Promise.resolve(nvmlReturn.noPermission) }, [])),
    });
    const error = await refusal(nvml);
    expect(error.message).toBe(
      'no permission to open the GPUs (nvmlInit_v2: error 4): check access to /dev/nvidia*',
    );
  });
});

describe('cudaVersionText', () => {
  it.each([
    [13010, '13.1'],
    [12040, '12.4'],
    [11020, '11.2'],
    [12090, '12.9'],
  ])('%i is %s', (version, text) => {
    expect(cudaVersionText(version)).toBe(text);
  });
});
