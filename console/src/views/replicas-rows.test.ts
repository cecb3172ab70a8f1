import { describe, expect, it } from 'vitest';

import type { ReplicaView, ShardView } from '../api.js';
import {
  bytesText,
  LogLines,
  percentDone,
  progressText,
  replicaDevices,
  replicaRow,
} from './replicas-rows.js';

const now = Date.parse('2026-12-03T13:00:00Z');

const shard = (o: Partial<ShardView>): ShardView => ({
  rank: 0,
  node: 'gpu-1',
  devices: ['0'],
  port: 9000,
  state: 'ready',
  restarts: 0,
  ...o,
});

const replica = (o: Partial<ReplicaView>): ReplicaView => ({
  id: 'r-1',
  model: 'qwen',
  profile: 'default',
  engine: 'vllm',
  state: 'ready',
  restarts: 0,
  shards: [shard({})],
  ...o,
});

describe('percentDone', () => {
  it.each([
    { done: 0, total: 0, pct: 0 },
    { done: 25, total: 100, pct: 25 },
    // Never 100 before the last byte.
    { done: 999, total: 1000, pct: 99 },
    { done: 1000, total: 1000, pct: 100 },
  ])('$done of $total is $pct%', ({ done, total, pct }) => {
    expect(percentDone({ done, total })).toBe(pct);
  });
});

describe('bytesText and progressText', () => {
  it.each([
    { bytes: 512, text: '512 B' },
    { bytes: 85_000_000, text: '85 MB' },
    { bytes: 4_700_000_000, text: '4.7 GB' },
    { bytes: 999_600_000, text: '1.0 GB' },
  ])('$bytes bytes read $text', ({ bytes, text }) => {
    expect(bytesText(bytes)).toBe(text);
  });

  it.each([
    {
      p: { done: 3.2e9, total: 4.7e9, rate_bps: 85e6, eta_s: 18 },
      text: '3.2 GB of 4.7 GB, 85 MB/s, 18 s left',
    },
    {
      p: { done: 1e9, total: 4.7e9, rate_bps: 1e6, eta_s: 3700 },
      text: '1.0 GB of 4.7 GB, 1.0 MB/s, 62 min left',
    },
    // Stalled: no rate, so no time left is guessed.
    { p: { done: 1e9, total: 4.7e9, rate_bps: 0, eta_s: 10 }, text: '1.0 GB of 4.7 GB' },
  ])('$text', ({ p, text }) => {
    expect(progressText(p)).toBe(text);
  });
});

describe('replicaDevices', () => {
  it.each([
    { what: 'one shard on two cards', shards: [shard({ devices: ['0', '1'] })], text: '0, 1' },
    { what: 'a MIG instance', shards: [shard({ devices: ['1/mig1'] })], text: '1/mig1' },
    { what: 'on CPU with threads', shards: [shard({ devices: [], threads: 8 })], text: 'cpu (8 threads)' },
    { what: 'on CPU with one thread', shards: [shard({ devices: [], threads: 1 })], text: 'cpu (1 thread)' },
    {
      what: 'over two nodes, each named',
      shards: [shard({ devices: ['0', '1'] }), shard({ rank: 1, node: 'gpu-2', devices: ['0', '1'] })],
      text: 'gpu-1: 0, 1; gpu-2: 0, 1',
    },
    { what: 'waiting for room', shards: [], text: '—' },
  ])('$what', ({ shards, text }) => {
    expect(replicaDevices({ shards })).toBe(text);
  });
});

describe('replicaRow', () => {
  it.each([
    {
      what: 'a ready replica with its node, endpoint and age',
      r: replica({
        node: 'gpu-1',
        endpoint: 'http://10.0.0.2:9000',
        ready_since: '2026-12-03T12:55:00Z',
        restarts: 2,
      }),
      row: {
        key: 'r-1',
        id: 'r-1',
        model: 'qwen',
        profile: 'default',
        state: 'ready',
        stateText: 'ready',
        node: 'gpu-1',
        devices: '0',
        restarts: 2,
        readySince: '5m ago',
        endpoint: 'http://10.0.0.2:9000',
        retiring: false,
      },
    },
    {
      what: 'a pending one: no id, no profile, no node, its reason',
      r: replica({
        id: null,
        profile: null,
        state: 'pending',
        reason: 'no node has 2 free a100-80g',
        shards: [],
      }),
      row: {
        key: 'pending-qwen-3',
        id: null,
        model: 'qwen',
        profile: '—',
        state: 'pending',
        stateText: 'pending',
        reason: 'no node has 2 free a100-80g',
        node: '—',
        devices: '—',
        restarts: 0,
        readySince: '—',
        endpoint: '—',
        retiring: false,
      },
    },
    {
      what: 'downloading, with its progress',
      r: replica({
        state: 'downloading',
        node: 'gpu-1',
        download: { done: 25e8, total: 1e10, rate_bps: 5e7, eta_s: 150 },
      }),
      row: {
        key: 'r-1',
        id: 'r-1',
        model: 'qwen',
        profile: 'default',
        state: 'downloading',
        stateText: 'downloading 25%',
        progress: 0.25,
        progressText: '2.5 GB of 10 GB, 50 MB/s, 3 min left',
        node: 'gpu-1',
        devices: '0',
        restarts: 0,
        readySince: '—',
        endpoint: '—',
        retiring: false,
      },
    },
    {
      what: 'retiring: said as replaced',
      r: replica({ retiring: true, node: 'gpu-1' }),
      row: {
        key: 'r-1',
        id: 'r-1',
        model: 'qwen',
        profile: 'default',
        state: 'ready',
        stateText: 'ready (replaced)',
        node: 'gpu-1',
        devices: '0',
        restarts: 0,
        readySince: '—',
        endpoint: '—',
        retiring: true,
      },
    },
  ])('$what', ({ r, row }) => {
    expect(replicaRow(r, 3, now)).toEqual(row);
  });
});

describe('LogLines', () => {
  it('joins lines cut across chunks, and shows the line still coming', () => {
    const l = new LogLines();
    l.push('loading mo');
    expect(l.text()).toBe('loading mo');
    l.push('del\nlistening on :9000\nGET /hea');
    expect(l.text()).toBe('loading model\nlistening on :9000\nGET /hea');
    l.push('lth 200\n');
    expect(l.text()).toBe('loading model\nlistening on :9000\nGET /health 200');
  });

  it('keeps only the last lines', () => {
    const l = new LogLines(2);
    l.push('a\nb\nc\nd\n');
    expect(l.text()).toBe('c\nd');
  });
});
