/** What the control plane sends agents, as the agent tests build it. */
import type { ModelSpec } from '../../src/catalog/model-spec.js';
import type { EngineSettingsWire } from '../../src/protocol/agent-protocol.js';

/** The engine settings of an assignment: llama.cpp's install pointed at a closed port (nothing is fetched). */
export function testEngines(parallel = 4): EngineSettingsWire {
  return {
    llamacpp: { parallel, threads: 1, build: 'b10587', release_url: 'http://127.0.0.1:9/releases' },
    vllm: { bin: 'vllm' },
    sglang: { bin: 'python3' },
    trtllm: { bin: 'trtllm-serve' },
    stop_grace_s: 2,
  };
}

/** A model of one CPU profile served by llama.cpp, every default filled in. */
export function cpuModel(name: string, source: string): ModelSpec {
  return {
    name,
    source,
    replicas: 1,
    profiles: [
      {
        name: 'cpu',
        engine: 'llamacpp',
        cpu: true,
        tp: 1,
        pp: 1,
        gpus_per_node: 0,
        nodes: 1,
        args: [],
        env: {},
        adapters: [],
      },
    ],
  };
}
