import { NvidiaSmiDiscovery } from './nvidia-smi/nvidia-smi-discovery.js';
import { NvmlDiscovery } from './nvml/nvml-discovery.js';
import { DiscoveryError, type GpuDiscovery, type GpuInventory } from './types.js';

export interface DiscoverOptions {
  nvml?: GpuDiscovery;
  nvidiaSmi?: GpuDiscovery;
}

/**
 * A node's GPUs: through NVML when its library loads, else nvidia-smi, else none (a
 * CPU-only node, which is not an error). Each path not taken leaves its reason, so
 * `llmgw doctor` can say why a machine with cards reports none.
 */
export async function discoverGpus(options: DiscoverOptions): Promise<GpuInventory> {
  const reasons: string[] = [];
  for (const path of [options.nvml, options.nvidiaSmi]) {
    if (path === undefined) continue;
    try {
      const found = await path.discover();
      return { method: path.method, reasons, ...found };
    } catch (e) {
      // A driver that is not loaded fails both paths; each says so in its own words.
      reasons.push(`${path.method}: ${reasonOf(e)}`);
    }
  }
  return { method: 'none', reasons, cards: [] };
}

function reasonOf(e: unknown): string {
  if (e instanceof DiscoveryError) return e.message;
  // A bug in a path must not take the agent down with it; it still shows in the reasons.
  return `failed unexpectedly: ${e instanceof Error ? e.message : String(e)}`;
}

/** Both paths as the environment configures them: LLMGW_NVML_LIBRARY, LLMGW_NVIDIA_SMI. */
export function defaultDiscoveries(env: NodeJS.ProcessEnv): Required<DiscoverOptions> {
  const library = env['LLMGW_NVML_LIBRARY'];
  const binary = env['LLMGW_NVIDIA_SMI'];
  return {
    nvml: new NvmlDiscovery(library === undefined || library === '' ? {} : { library }),
    nvidiaSmi: new NvidiaSmiDiscovery(binary === undefined || binary === '' ? {} : { binary }),
  };
}
