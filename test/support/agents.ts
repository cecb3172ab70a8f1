/**
 * Agents in the test's process, composed as `llmgw agent` composes one (the channel, the shard
 * executor, the supervisor), joined to a test control plane with a fresh join token.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';

import { Agent } from '../../src/agent/agent.js';
import { ShardExecutor } from '../../src/agent/shard-executor.js';
import { Supervisor } from '../../src/agent/shards/process/process-supervisor.js';
import type { Card } from '../../src/gpu/types.js';

import { api } from './control-plane.js';
import { inventoryWith } from './inventory.js';

export interface TestAgent {
  name: string;
  dataDir: string;
  agent: Agent;
  supervisor: Supervisor;
  /** Stops the agent and its engines, and removes a data dir made here. */
  stop: () => Promise<void>;
  /** Stops the agent and leaves its engines running, as a killed agent does, for the next one on dataDir. */
  detach: () => Promise<void>;
}

export interface TestAgentOptions {
  /** The control planes it is given, in order (default: the one it joins with). */
  servers?: string[];
  /** Its data dir: another agent's, to start as that agent restarted (default: a new one). */
  dataDir?: string;
  /** Whether to join with a fresh token (default true; an agent restarted on its data dir has its credential). */
  token?: boolean;
  /** How long an earlier agent's unassigned engines are kept without a control plane. */
  adoptGraceMs?: number;
}

/** `cards`: the GPUs its inventory reports (none by default). */
export async function startTestAgent(
  t: { url: string; adminKey: string },
  name: string,
  cards: Card[] = [],
  options: TestAgentOptions = {},
): Promise<TestAgent> {
  const quiet = pino({ level: 'silent' });
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), `llmgw-agent-${name}-`));
  const token =
    options.token === false
      ? undefined
      : ((await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string);
  const late: { exec?: ShardExecutor; agent?: Agent } = {};
  // One inventory for what the agent reports and what its shards start on: a shard placed on
  // a card it reports finds that card.
  const inventory = inventoryWith(cards, name);
  const supervisor = new Supervisor({
    logDir: join(dataDir, 'logs'),
    onStatus: () => late.exec?.report(),
    onRemoved: () => late.exec?.report(),
  });
  const exec = new ShardExecutor({
    dataDir,
    logger: quiet,
    supervisor,
    localBins: {},
    inventory: () => inventory,
    send: (m) => late.agent?.send(m) ?? false,
    bindHost: '127.0.0.1',
    controlPlane: () => ({
      url: late.agent?.server ?? t.url,
      credential: late.agent?.identity.credential,
      nodeId: late.agent?.identity.id,
    }),
    models: { reportMs: 200 },
    ...(options.adoptGraceMs === undefined ? {} : { adoptGraceMs: options.adoptGraceMs }),
  });
  late.exec = exec;
  const a = new Agent({
    server: options.servers ?? t.url,
    token,
    name,
    dataDir,
    logger: quiet,
    inventory: () => Promise.resolve(inventory),
    backoff: { initialMs: 20, maxMs: 200 },
    onMessage: (m) => exec.handle(m),
    onWelcome: () => exec.report(),
  });
  late.agent = a;
  // As startNodeAgent: the last assignment first, taking over what an earlier agent left running.
  exec.resume();
  await supervisor.adoptedChecked(5000);
  void a.run();
  await a.joined;
  return {
    name,
    dataDir,
    agent: a,
    supervisor,
    stop: async () => {
      await a.stop();
      await exec.stop();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
    detach: async () => {
      await a.stop();
      await exec.detach();
    },
  };
}

/**
 * Dials the agent channel as an agent would (a WebSocket upgrade with `headers`), for a
 * refusal: resolves with the answer's status and body, rejects if the upgrade is accepted.
 */
export function dialAgentChannel(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/api/v1/agent/connect`, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        ...headers,
      },
    });
    req.on('response', (r) => {
      let body = '';
      r.on('data', (d: Buffer) => (body += d.toString()));
      r.on('end', () => resolve({ status: r.statusCode, body }));
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('the control plane took the agent'));
    });
    req.on('error', reject);
    req.end();
  });
}
