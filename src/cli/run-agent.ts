import { lockAgentDir } from './instance-lock.js';
import { startNodeAgent, type NodeAgent } from './node-agent.js';
import { createLogger } from './logger.js';
import { describeFix, secureDataDir } from './private-files.js';
import { commandSettings } from './settings.js';
import { untilSignalled } from './signals.js';

export interface RunAgentOptions {
  /** The control planes of the cluster, tried in turn. */
  server: string[];
  token: string | undefined;
  name: string | undefined;
  config: string | undefined;
  /** On a signal, leave the engines running for the next agent to adopt. */
  keepEngines?: boolean;
}

export async function runAgent(o: RunAgentOptions): Promise<void> {
  const logger = createLogger('agent');
  // Watched from the start: a signal while starting stops the agent once it has started.
  const stopped = untilSignalled(logger);
  const loaded = commandSettings({ path: o.config, env: process.env });
  // Its credential and the engines' keys are kept there.
  secureDataDir(loaded.settings.data_dir, { create: true, onFixed: (f) => logger.warn(f, describeFix(f)) });
  const lock = await lockAgentDir(loaded.settings.data_dir);
  let node: NodeAgent;
  try {
    node = await startNodeAgent({
      server: o.server,
      token: o.token,
      name: o.name,
      settings: loaded.settings,
      logger,
    });
  } catch (e) {
    await lock.release();
    throw e;
  }
  logger.info(
    { server: o.server, node: node.agent.identity.name, dataDir: loaded.settings.data_dir },
    'agent starting',
  );
  const running = node.agent.run();
  // A refusal ends the agent with its message, and its engines stop; a signal ends it
  // cleanly, and with --keep-engines leaves them to the next agent.
  const outcome = { signalled: false };
  try {
    await Promise.race([running, stopped.then(() => (outcome.signalled = true))]);
  } finally {
    if (outcome.signalled && o.keepEngines === true) {
      const engines = node.supervisor.statuses().length;
      await node.detach();
      logger.info(
        { engines },
        'stopped; the engines run on, and the next agent on this data dir takes them over',
      );
    } else await node.stop();
    await lock.release();
  }
}
