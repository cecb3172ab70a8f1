/**
 * Agents in the test's process, composed as `llmgw agent` composes one (the channel, the shard
 * executor, the supervisor), joined to a test control plane with a fresh join token.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';

import { Agent } from '../../src/agent/agent.js';
import { ShardExecutor } from '../../src/agent/shard-executor.js';
import { Supervisor } from '../../src/agent/supervisor/supervisor.js';
import type { Card } from '../../src/gpu/types.js';

import { api, type TestControlPlane } from './control-plane.js';
import { inventoryWith } from './inventory.js';

export interface TestAgent {
  name: string;
  dataDir: string;
  stop: () => Promise<void>;
}

/** `cards`: the GPUs its inventory reports (none by default). */
export async function startTestAgent(
  t: TestControlPlane,
  name: string,
  cards: Card[] = [],
): Promise<TestAgent> {
  const quiet = pino({ level: 'silent' });
  const dataDir = mkdtempSync(join(tmpdir(), `llmgw-agent-${name}-`));
  const token = (await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string;
  const late: { exec?: ShardExecutor; agent?: Agent } = {};
  const supervisor = new Supervisor({
    logDir: join(dataDir, 'logs'),
    onStatus: () => late.exec?.report(),
  });
  const exec = new ShardExecutor({
    dataDir,
    logger: quiet,
    supervisor,
    localBins: {},
    inventory: () => undefined,
    send: (m) => late.agent?.send(m) ?? false,
    bindHost: '127.0.0.1',
    controlPlane: () => ({
      url: t.url,
      credential: late.agent?.identity.credential,
      nodeId: late.agent?.identity.id,
    }),
    models: { reportMs: 200 },
  });
  late.exec = exec;
  const a = new Agent({
    server: t.url,
    token,
    name,
    dataDir,
    logger: quiet,
    inventory: () => Promise.resolve(inventoryWith(cards, name)),
    backoff: { initialMs: 20, maxMs: 200 },
    onMessage: (m) => exec.handle(m),
    onWelcome: () => exec.report(),
  });
  late.agent = a;
  void a.run();
  await a.joined;
  return {
    name,
    dataDir,
    stop: async () => {
      await a.stop();
      await exec.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
