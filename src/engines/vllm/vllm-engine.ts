import { LlmgwError } from '../../core/errors.js';
import { hasFlag, unlessSet, wholeFlag } from '../args.js';
import { checkDevices, gpuOnly } from '../check-devices.js';
import { shardEnv } from '../device-env.js';
import { snapshotWeights } from '../snapshot-weights.js';
import { adapterAsModel, type Engine, type ProcessSpec, type ShardLaunch } from '../types.js';

import { vllmBudget } from './vllm-budget.js';

/**
 * vLLM, as `vllm serve MODEL`. Tensor and pipeline parallel over the cards of a replica;
 * a replica over several nodes uses vLLM's own multiprocessing across nodes (no Ray
 * cluster to run beside it): rank 0 serves HTTP, the other ranks run headless.
 */
export const vllmEngine: Engine = {
  name: 'vllm',
  healthPath: '/health',
  metricsPath: '/metrics',
  loadMetrics: {
    running: 'vllm:num_requests_running',
    waiting: 'vllm:num_requests_waiting',
    kvUsage: 'vllm:kv_cache_usage_perc',
  },
  // Nothing listens until the engine is loaded.
  loading: 'refuses-connections',
  servesHttp: (rank) => rank === 0,
  servesResponses: true,
  selectAdapter: adapterAsModel,
  // Installed by the node's operator (pip, the image), never by the agent.
  installedByAgent: false,
  // It reads the Hugging Face snapshot as it is.
  fetchedWeights: snapshotWeights,

  validate(profile, devices) {
    return [...gpuOnly('vllm', profile), ...checkDevices(profile, devices)];
  },

  commands(launch) {
    return [vllmServe(launch)];
  },

  label: 'vLLM',
  runsOnCpu: false,
  formats: ['safetensors'],
  split: 'tensor',
  cardFlags: { cards: ['--tensor-parallel-size', '-tp'], pp: ['--pipeline-parallel-size', '-pp'] },
  // vLLM's parser takes underscores for dashes.
  context: { flags: ['--max-model-len', '--max_model_len'] },
  pastTrained: (context) =>
    `User-specified max_model_len (${context}) is greater than the derived max_model_len`,
  budget: vllmBudget,
  // v0.21.0: Docker Hub vllm/vllm-openai, the release InferenceX moved its H200/B200
  // configurations to in May 2026 (SemiAnalysisAI/InferenceX perf-changelog.yaml).
  defaultImage: () => 'vllm/vllm-openai:v0.21.0',
  imageExecutable: 'vllm',
  defaultBin: 'vllm',
  onNode: { bin: 'vllm' },
  ownedFlags: ['--host', '--port', '--api-key'],
  ownedEnv: { VLLM_API_KEY: 'the gateway holds the engine key' },
  capacity: (args) => wholeFlag(args, ['--max-num-seqs']) ?? 256,
};

function vllmServe(launch: ShardLaunch): ProcessSpec {
  const { profile, model, settings } = launch;
  const own = profile.args;
  const http = vllmEngine.servesHttp(launch.rank, launch.ranks);

  const args = ['serve', launch.weights.path];
  // Only the rank that serves the API binds it: a headless rank has no HTTP server.
  if (http) args.push('--host', launch.host, '--port', String(launch.port));
  args.push(...unlessSet(own, ['--served-model-name'], profile.served_model_name ?? model.name));
  if (profile.tp > 1) args.push(...unlessSet(own, ['--tensor-parallel-size', '-tp'], profile.tp));
  if (profile.pp > 1) args.push(...unlessSet(own, ['--pipeline-parallel-size', '-pp'], profile.pp));
  if (launch.ranks > 1) args.push(...multiNode(launch));
  if (model.context_length !== undefined)
    args.push(...unlessSet(own, ['--max-model-len'], model.context_length));

  // Every adapter is served under its own name (a request picks one by `model`), each
  // batch able to hold all of them.
  if (profile.adapters.length > 0) {
    if (!hasFlag(own, '--enable-lora')) args.push('--enable-lora');
    if (!hasFlag(own, '--lora-modules'))
      args.push('--lora-modules', ...profile.adapters.map((a) => `${a.name}=${a.path}`));
    args.push(...unlessSet(own, ['--max-loras'], profile.adapters.length));
  }
  args.push(...own);

  // The key by environment: on the command line `ps` would show it to every user of the
  // node. vLLM checks it on /v1/* only; /health and /metrics stay open.
  const env = shardEnv(launch, http && launch.apiKey !== '' ? { VLLM_API_KEY: launch.apiKey } : {});
  return { name: 'vllm', bin: settings.bin, args, env };
}

/**
 * vLLM's multiprocessing across nodes: every rank names the head and its own rank; the
 * others also run headless. The backend is named, because older vLLM chooses Ray when a
 * node has fewer cards than the whole replica.
 */
function multiNode(launch: ShardLaunch): string[] {
  const own = launch.profile.args;
  if (launch.head === undefined) {
    throw new LlmgwError(
      'internal',
      `replica ${launch.replica} spans ${launch.ranks} nodes but its launch names no head address: placement must give one`,
    );
  }
  const args = [
    '--nnodes',
    String(launch.ranks),
    '--node-rank',
    String(launch.rank),
    '--master-addr',
    launch.head.address,
    '--master-port',
    String(launch.head.port),
    ...unlessSet(own, ['--distributed-executor-backend'], 'mp'),
  ];
  if (launch.rank > 0) args.push('--headless');
  return args;
}
