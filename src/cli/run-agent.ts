
import { startNodeAgent } from './node-agent.js';
import { createLogger } from './logger.js';
import { commandSettings } from './settings.js';
import { untilSignalled } from './signals.js';

export interface RunAgentOptions {
  server: string;
  token: string | undefined;
  name: string | undefined;
  config: string | undefined;
}

export async function runAgent(o: RunAgentOptions): Promise<void> {
  const logger = createLogger('agent');
  const loaded = commandSettings({ path: o.config, env: process.env });
  const node = await startNodeAgent({ server: o.server, token: o.token, name: o.name, settings: loaded.settings, logger });
  logger.info({ server: o.server, node: node.agent.identity.name, dataDir: loaded.settings.data_dir }, 'agent starting');
  const running = node.agent.run();
  const stopped = untilSignalled(logger);
  // A refusal ends the agent with its message; a signal ends it cleanly. Either way its engines stop.
  try {
    await Promise.race([running, stopped]);
  } finally {
    await node.stop();
  }
}
