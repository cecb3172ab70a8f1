import { hostInfo } from '../agent/host.js';
import { defaultDiscoveries, discoverGpus } from '../gpu/discover.js';
import type { NodeInventory } from '../gpu/types.js';

import { version } from './version.js';

/** This machine's inventory, with GPU discovery as the environment configures it (NVML, nvidia-smi). */
export function inventoryReader(
  dataDir: string,
  address?: string,
  env: NodeJS.ProcessEnv = process.env,
): () => Promise<NodeInventory> {
  const discoveries = defaultDiscoveries(env);
  return async () => ({
    host: hostInfo(dataDir),
    gpu: await discoverGpus(discoveries),
    agent_version: version,
    ...(address === undefined ? {} : { address }),
  });
}
