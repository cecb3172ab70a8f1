import { describe, expect, it } from 'vitest';

import { smiFixtureFile, type SmiFixture } from '../../../test/support/fake-gpu.js';
import { parseSmiQuery, SmiQueryFormatError, type QueriedGpu } from './parse-query.js';

function gpus(fixture: SmiFixture): QueriedGpu[] {
  return parseSmiQuery(smiFixtureFile(fixture, 'query.xml')).gpus;
}

describe('parseSmiQuery', () => {
  it('reads driver 590: average power draw, MIG devices, 555+ ECC names', () => {
    const query = parseSmiQuery(smiFixtureFile('h100-mig-590', 'query.xml'));
    expect(query.driverVersion).toBe('590.48.01');
    expect(query.cudaVersion).toBe('13.1');
    const [h100] = query.gpus;
    expect(h100).toMatchObject({
      busId: '00000000:00:09.0',
      name: 'NVIDIA H100 80GB HBM3',
      uuid: 'GPU-950792bf-a01c-3f1a-e122-3473e67f54b2',
      memoryTotalMib: 81559,
      memoryUsedMib: 7561,
      temperatureC: 52,
      powerW: 433.78,
      powerLimitW: 700,
      mig: { current: true, pending: true },
      // parity 0 + secded 2 + DRAM 1; the volatile block and the per-instance counts are not aggregate.
      wear: {
        ecc_uncorrectable: 3,
        remapped_rows_uncorrectable: 1,
        remapped_rows_pending: false,
        remapped_rows_failure: false,
      },
    });
    expect(h100?.utilizationPct).toBeUndefined();
    expect(h100?.wear.retired_pages).toBeUndefined();
    expect(h100?.instances).toEqual([
      { index: 0, gpuInstanceId: 2, computeInstanceId: 0, memoryTotalMib: 40448, memoryUsedMib: 7510 },
      { index: 1, gpuInstanceId: 3, computeInstanceId: 0, memoryTotalMib: 20096, memoryUsedMib: 13 },
      { index: 2, gpuInstanceId: 9, computeInstanceId: 0, memoryTotalMib: 9984, memoryUsedMib: 6 },
    ]);
    expect(h100?.processes).toEqual([
      { pid: 21198, name: './gpu_burn', memoryMib: 7484, gpuInstanceId: 2, computeInstanceId: 0 },
    ]);
  });

  it('reads driver 550: <gpu_power_readings><power_draw>, Ampere ECC, processes without MIG ids', () => {
    const cards = gpus('a100x8-550');
    expect(cards).toHaveLength(8);
    expect(cards.map((g) => g.busId)).toEqual([
      '00000000:07:00.0',
      '00000000:0F:00.0',
      '00000000:47:00.0',
      '00000000:4E:00.0',
      '00000000:87:00.0',
      '00000000:90:00.0',
      '00000000:B7:00.0',
      '00000000:BD:00.0',
    ]);
    expect(cards[0]).toMatchObject({
      memoryTotalMib: 81920,
      memoryUsedMib: 73558,
      utilizationPct: 90,
      powerW: 60,
      powerLimitW: 400,
      temperatureC: 30,
      mig: { current: false, pending: false },
      instances: [],
      wear: { ecc_uncorrectable: 0, remapped_rows_uncorrectable: 0, remapped_rows_pending: false },
    });
    expect(cards[0]?.processes).toEqual([
      { pid: 31000, name: '/usr/bin/python3', memoryMib: 72530 },
      { pid: 31100, name: 'llama-server', memoryMib: 1024 },
    ]);
    expect(cards[5]?.wear).toMatchObject({
      ecc_uncorrectable: 2,
      remapped_rows_uncorrectable: 2,
      remapped_rows_pending: true,
    });
    expect(cards[7]?.processes).toEqual([]);
  });

  it('reads driver 460: <power_readings>, single/double-bit ECC, retired pages, no MIG on a T4', () => {
    const query = parseSmiQuery(smiFixtureFile('old-460', 'query.xml'));
    expect(query).toMatchObject({ driverVersion: '460.73.01', cudaVersion: '11.2' });
    const [a100, t4] = query.gpus;
    expect(a100).toMatchObject({
      name: 'A100-PCIE-40GB',
      powerW: 36.85,
      powerLimitW: 250,
      mig: { current: true, pending: true },
      wear: { ecc_uncorrectable: 1, remapped_rows_uncorrectable: 0 },
      instances: [
        { index: 0, gpuInstanceId: 1, computeInstanceId: 0, memoryTotalMib: 20096, memoryUsedMib: 3110 },
        { index: 1, gpuInstanceId: 5, computeInstanceId: 0, memoryTotalMib: 9984, memoryUsedMib: 3 },
      ],
    });
    expect(t4).toMatchObject({ name: 'Tesla T4', utilizationPct: 17, powerW: 31.25, powerLimitW: 70 });
    expect(t4?.mig).toBeUndefined();
    expect(t4?.wear).toEqual({ ecc_uncorrectable: 0, retired_pages: 3 });
  });

  it('reads <mig_devices>None</mig_devices> as no instances', () => {
    const [carved, whole] = gpus('mig-none-carved');
    expect(carved).toMatchObject({ mig: { current: true, pending: true }, instances: [], processes: [] });
    expect(whole).toMatchObject({ mig: { current: false, pending: false }, utilizationPct: 0 });
  });

  it('reads a pending MIG mode', () => {
    expect(gpus('mig-pending').map((g) => g.mig)).toEqual([
      { current: false, pending: true },
      { current: true, pending: false },
    ]);
  });

  it('leaves out every N/A rather than reading it as zero', () => {
    const [laptop] = gpus('na-everywhere');
    expect(laptop).toEqual({
      busId: '00000000:01:00.0',
      name: 'NVIDIA GeForce RTX 4070 Laptop GPU',
      uuid: 'GPU-1b724e78-eef5-4163-d43c-e4da15d41176',
      memoryTotalMib: 8188,
      wear: {},
      instances: [],
      // A process in another PID namespace, with memory N/A (WDDM, containers).
      processes: [{ pid: 2210, name: '', memoryMib: 0 }],
    });
  });

  it('reads driver 575: compute instances sharing one GPU instance', () => {
    const query = parseSmiQuery(smiFixtureFile('h200-compute-instances', 'query.xml'));
    expect(query.driverVersion).toBe('575.51.03');
    const [whole, split] = query.gpus;
    expect(whole).toMatchObject({
      memoryTotalMib: 143771,
      powerW: 612.35,
      utilizationPct: 87,
      wear: { ecc_uncorrectable: 0 },
    });
    expect(split?.instances.map((i) => [i.gpuInstanceId, i.computeInstanceId, i.memoryTotalMib])).toEqual([
      [1, 0, 71424],
      [1, 1, 71424],
    ]);
    expect(split?.processes).toEqual([
      { pid: 42000, name: 'llama-server', memoryMib: 30200, gpuInstanceId: 1, computeInstanceId: 1 },
    ]);
    expect(split?.wear.ecc_uncorrectable).toBe(1);
  });

  it('reads instant power when that is all there is', () => {
    const xml = `<?xml version="1.0" ?><nvidia_smi_log><gpu id="00000000:01:00.0"><product_name>NVIDIA L4</product_name>
      <gpu_power_readings><average_power_draw>N/A</average_power_draw><instant_power_draw>27.10 W</instant_power_draw></gpu_power_readings>
      </gpu></nvidia_smi_log>`;
    expect(parseSmiQuery(xml).gpus[0]?.powerW).toBe(27.1);
  });

  it('reads a log with no GPUs', () => {
    expect(
      parseSmiQuery(
        '<?xml version="1.0" ?>\n<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>',
      ),
    ).toEqual({
      gpus: [],
    });
  });

  it.each(['', 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.', '<other/>'])(
    'refuses %j',
    (text) => {
      expect(() => parseSmiQuery(text)).toThrow(SmiQueryFormatError);
    },
  );
});
