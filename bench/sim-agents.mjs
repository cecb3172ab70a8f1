// Simulated agents: plain `ws` clients that speak the agent protocol as `llmgw agent` does
// (inventory first, heartbeats after the welcome, reconnection with backoff and jitter),
// without a machine behind them. Used by bench/agents.bench.mjs and the reconnect-storm
// scenario (test/chaos/reconnect-storm.test.ts). Types: sim-agents.d.mts.
import { randomUUID } from 'node:crypto';

import WebSocket from 'ws';

const channelPath = '/api/v1/agent/connect';

function card(i) {
  return {
    index: i,
    uuid: `GPU-${randomUUID()}`,
    name: 'NVIDIA H100 80GB HBM3',
    class: 'h100-80g',
    pci_bus_id: `00000000:${(0x10 + i).toString(16).toUpperCase()}:00.0`,
    memory_total_mib: 81559,
    memory_used_mib: 0,
    temperature_c: 40,
    power_w: 100,
    power_limit_w: 700,
    utilization_pct: 0,
    wear: { ecc_uncorrectable: 0, remapped_rows_pending: false, remapped_rows_failure: false },
    mig: { current: false, pending: false },
    processes: [],
    instances: [],
  };
}

/** A node with `cards` H100s, as an agent's inventory says it. */
export function simInventory(name, cards = 8) {
  return {
    host: {
      hostname: name,
      os: 'linux bench',
      arch: 'x64',
      cpus: { count: 64, model: 'Bench CPU' },
      memory: { total_mib: 1_000_000, free_mib: 900_000 },
      disk: { path: '/var/lib/llmgw', total_mib: 4_000_000, free_mib: 3_000_000 },
    },
    gpu: {
      method: 'nvml',
      reasons: [],
      driver_version: '590.48.01',
      cuda_version: '13.1',
      cards: Array.from({ length: cards }, (_, i) => card(i)),
    },
    agent_version: 'bench',
  };
}

/** A heartbeat's telemetry for `cards` busy cards. */
export function simTelemetry(cards = 8) {
  return {
    cards: Array.from({ length: cards }, (_, i) => ({
      index: i,
      memory_used_mib: Math.round(Math.random() * 80000),
      temperature_c: 30 + Math.round(Math.random() * 40),
      power_w: Math.round(Math.random() * 700),
      utilization_pct: Math.round(Math.random() * 100),
      processes: [{ pid: 1000 + i, name: 'python3', memory_mib: 70000 }],
      instances: [],
    })),
    memory_free_mib: 800_000,
    disk_free_mib: 3_000_000,
  };
}

/** What a failed dial was: the peer reset it, refused it, answered with a status, or never answered. */
function failureOf(e) {
  const code = e?.code;
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'reset';
  if (code === 'ECONNREFUSED') return 'refused';
  if (/timed out/i.test(String(e?.message))) return 'timeout';
  return 'other';
}

/**
 * One simulated agent. It joins with `secret` (a join token), and once welcomed uses the
 * node credential it was given, as a real agent keeps it in its data dir. After any loss it
 * dials again after `retryDelay(attempt)` (attempt 0 after a welcomed connection ended).
 */
export class SimAgent {
  constructor(o) {
    this.url = `${o.url.replace(/^http/, 'ws').replace(/\/+$/, '')}${channelPath}`;
    this.token = o.secret;
    this.name = o.name;
    this.id = o.id ?? randomUUID();
    this.cards = o.cards ?? 8;
    this.retryDelay = o.retryDelay;
    this.heartbeatMs = o.heartbeatMs;
    this.handshakeMs = o.handshakeMs ?? 15_000;
    this.sourceAddress = o.sourceAddress;
    this.credential = undefined;
    /** Failed dials by kind (reset, refused, timeout, status, other) and the last one's message. */
    this.failures = { reset: 0, refused: 0, timeout: 0, status: 0, other: 0 };
    this.lastFailure = undefined;
    this.dials = 0;
    this.welcomes = 0;
    this.connected = false;
    /** performance.now() of the last welcome. */
    this.welcomedAt = undefined;
    /** A refusal that retrying cannot mend (401, 409): the agent stops, as `llmgw agent` does. */
    this.fatal = undefined;
    this.stopped = false;
    this.ws = undefined;
    this.timers = new Set();
    this.waiters = [];
  }

  start() {
    this.#dial(0);
    return this;
  }

  /** Resolves at the next welcome (at once when connected now). */
  welcomed() {
    if (this.connected) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Closes its connection and dials no more. */
  stop() {
    this.stopped = true;
    // clearTimeout clears an interval too (one Timeout class in Node).
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.ws?.terminate();
  }

  #later(fn, ms, repeat = false) {
    const t = (repeat ? setInterval : setTimeout)(() => {
      if (!repeat) this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
    return t;
  }

  #dial(attempt) {
    if (this.stopped) return;
    this.dials++;
    const ws = new WebSocket(this.url, {
      headers: {
        authorization: `Bearer ${this.credential ?? this.token}`,
        'x-llmgw-node-id': this.id,
        'x-llmgw-node-name': this.name,
        'x-llmgw-agent-version': 'bench',
      },
      handshakeTimeout: this.handshakeMs,
      ...(this.sourceAddress === undefined ? {} : { localAddress: this.sourceAddress }),
    });
    this.ws = ws;
    let welcomed = false;
    let failed = false;
    let beat;
    const fail = (kind, message) => {
      if (failed || welcomed) return;
      failed = true;
      this.failures[kind]++;
      this.lastFailure = `${kind}: ${message}`;
    };
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        fail('status', `${status} ${body.slice(0, 200)}`);
        // As the agent: a refusal of who it is ends it; anything else is tried again.
        if (status === 400 || status === 401 || status === 403 || status === 409)
          this.fatal = `${status} ${body}`;
        ws.terminate();
      });
    });
    ws.on('open', () =>
      ws.send(JSON.stringify({ type: 'inventory', inventory: simInventory(this.name, this.cards) })),
    );
    ws.on('message', (data) => {
      let m;
      try {
        m = JSON.parse(String(data));
      } catch {
        return;
      }
      if (m.type !== 'welcome' || welcomed) return;
      welcomed = true;
      this.connected = true;
      this.welcomes++;
      this.welcomedAt = performance.now();
      if (m.credential !== undefined) this.credential = m.credential;
      for (const w of this.waiters.splice(0)) w();
      if (this.heartbeatMs !== undefined) {
        // Heartbeats spread over the interval, as real agents drift apart.
        this.#later(() => {
          const send = () =>
            ws.readyState === WebSocket.OPEN &&
            ws.send(JSON.stringify({ type: 'heartbeat', telemetry: simTelemetry(this.cards) }));
          send();
          beat = this.#later(send, this.heartbeatMs, true);
        }, Math.random() * this.heartbeatMs);
      }
    });
    ws.on('error', (e) => fail(failureOf(e), e.message));
    ws.on('close', (code, reason) => {
      if (beat !== undefined) {
        clearInterval(beat);
        this.timers.delete(beat);
      }
      this.connected = false;
      if (this.stopped) return;
      if (code === 4401) this.fatal = `closed 4401: ${String(reason)}`;
      else if (!welcomed) fail('other', `closed ${code} ${String(reason)}`);
      if (this.fatal !== undefined) return;
      const next = welcomed ? 0 : attempt + 1;
      this.#later(() => this.#dial(next), this.retryDelay(next));
    });
  }
}

/**
 * The i-th loopback address past 127.1.0.0: Linux answers all of 127/8 on the loopback, so
 * each simulated agent can dial from an address of its own, as agents on separate machines
 * do (the control plane bounds the connections of one address: gateway.max_connections_per_client).
 */
export function loopbackSource(i) {
  return `127.1.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** Starts `count` simulated agents at once, named sim-0000, sim-0001, ... (or `prefix`-0000). */
export function startSimAgents(o) {
  return Array.from({ length: o.count }, (_, i) =>
    new SimAgent({
      ...o,
      name: `${o.prefix ?? 'sim'}-${String(i).padStart(4, '0')}`,
      ...(o.loopbackSources === true ? { sourceAddress: loopbackSource(i) } : {}),
    }).start(),
  );
}

/** Failures of a set of agents, summed by kind. */
export function failuresOf(agents) {
  const sum = { reset: 0, refused: 0, timeout: 0, status: 0, other: 0 };
  for (const a of agents) for (const k of Object.keys(sum)) sum[k] += a.failures[k];
  return sum;
}

/**
 * Waits until every agent is connected and was welcomed after `since` (a performance.now()),
 * or `deadlineMs` passed. Returns the ms from `since` to the last welcome, and who is missing.
 */
export async function waitAllJoined(agents, { since, deadlineMs }) {
  const end = since + deadlineMs;
  const missing = () =>
    agents.filter((a) => !a.connected || a.welcomedAt === undefined || a.welcomedAt < since);
  while (missing().length > 0 && performance.now() < end && agents.every((a) => a.fatal === undefined)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const left = missing();
  const last = Math.max(...agents.map((a) => a.welcomedAt ?? since));
  return { lastJoinMs: last - since, missing: left };
}
