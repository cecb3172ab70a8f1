import { describe, expect, it } from 'vitest';

import type { Device, NodeView } from '../api.js';
import { age, deviceRow, joinCommand, memoryBar, nodeWarnings } from './nodes-rows.js';

describe('memoryBar', () => {
  it.each([
    { used: 0, total: 81920, pct: 0, level: 'ok', text: '0 / 81,920 MiB' },
    { used: 40960, total: 81920, pct: 50, level: 'ok', text: '40,960 / 81,920 MiB' },
    { used: 73728, total: 81920, pct: 90, level: 'high', text: '73,728 / 81,920 MiB' },
    // Used above total for a moment: the bar stops at full.
    { used: 90000, total: 81920, pct: 100, level: 'high', text: '90,000 / 81,920 MiB' },
    // A device reporting no memory: an empty bar, not a division by zero.
    { used: 0, total: 0, pct: 0, level: 'ok', text: '0 / 0 MiB' },
  ])('$used of $total MiB is $pct %', ({ used, total, pct, level, text }) => {
    expect(memoryBar(used, total)).toEqual({ used, total, pct, level, text });
  });
});

const card: Device = {
  id: 0,
  label: '0',
  class: 'a100-80g',
  card: 0,
  uuid: 'GPU-0',
  memory_total_mib: 81920,
  memory_used_mib: 1024,
  temperature_c: 41,
  power_w: 87.6,
  utilization_pct: 12,
  wear: {},
  processes: [{ pid: 4242, name: 'llama-server', memory_mib: 1000 }],
};

const mig: Device = {
  id: 1101,
  label: '1/mig1',
  class: 'a100-80g-mig-3g.40gb',
  card: 1,
  uuid: 'MIG-1',
  mig: { profile: '3g.40gb', instance: 1, gpu_instance_id: 2, compute_instance_id: 0 },
  memory_total_mib: 40192,
  memory_used_mib: 0,
  temperature_c: 38,
  wear: {},
  processes: [{ pid: 7, name: '', memory_mib: 12 }],
};

describe('deviceRow', () => {
  it.each([
    {
      what: 'a whole card with every figure',
      device: card,
      row: {
        id: '0',
        class: 'a100-80g',
        kind: 'card',
        temperature: '41 °C',
        power: '88 W',
        utilisation: '12 %',
        processes: ['4242 llama-server (1,000 MiB)'],
      },
    },
    {
      what: 'a MIG instance: utilisation said not measured, not 0; power unknown; a nameless process',
      device: mig,
      row: {
        id: '1/mig1',
        class: 'a100-80g-mig-3g.40gb',
        kind: 'MIG 3g.40gb',
        temperature: '38 °C',
        power: '—',
        utilisation: 'not measured on MIG',
        processes: ['7 ? (12 MiB)'],
      },
    },
    {
      what: 'a card whose driver gives no temperature, power or utilisation',
      device: {
        ...card,
        temperature_c: undefined,
        power_w: undefined,
        utilization_pct: undefined,
        processes: [],
      },
      row: {
        id: '0',
        class: 'a100-80g',
        kind: 'card',
        temperature: '—',
        power: '—',
        utilisation: '—',
        processes: [],
      },
    },
  ])('$what', ({ device, row }) => {
    const { memory, ...rest } = deviceRow(device);
    expect(rest).toEqual(row);
    expect(memory.text).toBe(
      `${device.memory_used_mib.toLocaleString('en-US')} / ${device.memory_total_mib.toLocaleString('en-US')} MiB`,
    );
  });
});

const node = (o: Partial<NodeView>): NodeView => ({
  id: 'n1',
  name: 'gpu-1',
  state: 'ready',
  last_seen: '2026-12-03T13:00:00Z',
  address: '10.0.0.2',
  agent_version: '0.1.0',
  joined_at: '2026-12-01T00:00:00Z',
  host: {
    hostname: 'gpu-1',
    os: 'linux',
    arch: 'x64',
    cpus: { count: 32, model: 'x' },
    memory: { total_mib: 1, free_mib: 1 },
    disk: { path: '/', total_mib: 1, free_mib: 1 },
  },
  discovery: { method: 'nvml', reasons: [] },
  devices: [],
  excluded: [],
  devices_by_class: {},
  devices_in_use_by_class: {},
  ...o,
});

describe('nodeWarnings', () => {
  it.each([
    { what: 'a healthy node', node: node({ devices: [card] }), warnings: [] },
    {
      what: 'a CPU node whose discovery found nothing of NVIDIA says nothing wrong',
      node: node({ discovery: { method: 'none', reasons: [] } }),
      warnings: [],
    },
    {
      what: 'a node whose GPU discovery failed, with why',
      node: node({
        discovery: { method: 'none', reasons: ['nvml: driver not loaded', 'nvidia-smi: exit 9'] },
      }),
      warnings: [
        {
          message:
            'no GPU found (nvml: driver not loaded; nvidia-smi: exit 9): run llmgw doctor on the node if it has cards',
          blocking: false,
        },
      ],
    },
    {
      what: 'a card left out blocks it, with its reason',
      node: node({
        excluded: [
          { card: 3, uuid: 'GPU-3', class: 'a100-80g', reason: 'MIG mode changes at the next reset' },
        ],
      }),
      warnings: [
        { message: 'card 3 (a100-80g) can run nothing: MIG mode changes at the next reset', blocking: true },
      ],
    },
    {
      what: "worn cards, said once per card though each MIG instance carries its card's wear",
      node: node({
        devices: [
          { ...card, wear: { ecc_uncorrectable: 2, remapped_rows_pending: true } },
          { ...mig, wear: { remapped_rows_failure: true } },
          { ...mig, id: 1102, label: '1/mig2', uuid: 'MIG-2', wear: { remapped_rows_failure: true } },
        ],
      }),
      warnings: [
        {
          message:
            'card 0 (a100-80g) has remapped memory rows waiting for a reset: reset it (nvidia-smi -r -i 0) when it is idle',
          blocking: false,
        },
        {
          message:
            'card 0 (a100-80g) has had 2 uncorrectable ECC errors: watch it, and drain it if the count grows',
          blocking: false,
        },
        {
          message: 'card 1 (a100-80g) failed to remap a memory row: it needs service; drain it',
          blocking: false,
        },
      ],
    },
  ])('$what', ({ node, warnings }) => {
    expect(nodeWarnings(node)).toEqual(warnings);
  });
});

describe('age', () => {
  const now = Date.parse('2026-12-03T13:00:00Z');
  it.each([
    { iso: '2026-12-03T12:59:18Z', text: '42s' },
    { iso: '2026-12-03T12:55:00Z', text: '5m' },
    { iso: '2026-12-03T10:00:00Z', text: '3h' },
    { iso: '2026-11-30T13:00:00Z', text: '3d' },
    // A clock ahead of this one: now, not a negative age.
    { iso: '2026-12-03T13:00:05Z', text: '0s' },
    { iso: undefined, text: '—' },
  ])('$iso is $text', ({ iso, text }) => {
    expect(age(iso, now)).toBe(text);
  });
});

describe('joinCommand', () => {
  it('is what ctl node token prints', () => {
    expect(joinCommand('https://cp.example:8080', 'llmgw_join_abc')).toBe(
      'llmgw agent --server https://cp.example:8080 --token llmgw_join_abc',
    );
  });
});
