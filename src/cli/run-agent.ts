import { Agent } from '../agent/agent.js';
import { loadSettings, SettingsError } from '../config/load.js';

import { inventoryReader } from './inventory.js';
import { createLogger } from './logger.js';
import { UsageError } from './usage-error.js';
import { untilSignalled } from './signals.js';

export interface RunAgentOptions {
  server: string;
  token: string | undefined;
  name: string | undefined;
  config: string | undefined;
}

export async function runAgent(o: RunAgentOptions): Promise<void> {
  const logger = createLogger('agent');
  let loaded;
  try {
    loaded = loadSettings({ path: o.config, env: process.env });
  } catch (e) {
    if (e instanceof SettingsError) throw new UsageError(e.message);
    throw e;
  }
  const dataDir = loaded.settings.data_dir;
  const agent = new Agent({ server: o.server, token: o.token, dataDir, name: o.name, logger, inventory: inventoryReader(dataDir) });
  logger.info({ server: o.server, node: agent.identity.name, dataDir }, 'agent starting');
  const running = agent.run();
  const stopped = untilSignalled(logger).then(() => agent.stop());
  // A refusal ends the agent with its message; a signal ends it cleanly.
  await Promise.race([running, stopped]);
  await agent.stop();
}
