import { LlmgwError } from '../../core/errors.js';
import { unlessSet, wholeFlag } from '../args.js';
import { checkDevices, gpuOnly } from '../check-devices.js';
import { shardEnv } from '../device-env.js';
import { snapshotWeights } from '../snapshot-weights.js';
import { adapterAsModel, type Engine, type ProcessSpec, type ShardLaunch } from '../types.js';

import { trtllmBudget } from './trtllm-budget.js';

/**
 * TensorRT-LLM, as `trtllm-serve MODEL` on the cards of one node.
 *
 * What it lacks, and what llmgw does about it:
 * - Several nodes need mpirun (or srun) around `trtllm-llmapi-launch`, which the agent does
 *   not run: validate refuses nodes > 1 and says which engines span nodes.
 * - trtllm-serve has no API key option. It is started all the same, bound where the agent
 *   says (loopback, or the node's address on a network only the gateway reaches), which is
 *   what keeps clients out; the launch's key is not passed.
 * - It has no served-name option in the releases read (`--served_model_name` is recent and
 *   unconfirmed), and an unknown option stops it from starting; so it answers under the path
 *   of its weights, and a profile whose release has the option may set it in args.
 * - Its /metrics is JSON (iteration stats, with `enable_iter_perf_stats` in a --config
 *   file), not Prometheus. The load names below are the fields of those stats; a reader of
 *   Prometheus text finds none and treats the replica as unmeasured. No KV figure is given:
 *   the stats count blocks, not a 0..1 share.
 */
export const trtllmEngine: Engine = {
  name: 'trtllm',
  healthPath: '/health',
  metricsPath: '/metrics',
  loadMetrics: {
    running: 'numActiveRequests',
    waiting: 'numQueuedRequests',
  },
  // It binds its socket before loading but only listens once the model is up.
  loading: 'refuses-connections',
  servesHttp: (rank) => rank === 0,
  servesResponses: false,
  selectAdapter: adapterAsModel,
  // Installed by the node's operator (pip, the image), never by the agent.
  installedByAgent: false,
  // It reads the Hugging Face snapshot as it is.
  fetchedWeights: snapshotWeights,

  validate(profile, devices) {
    const problems = gpuOnly('trtllm', profile);
    if (profile.nodes > 1) {
      problems.push(
        `trtllm spans nodes only under mpirun, which llmgw does not launch: use engine: vllm or sglang for a ${profile.nodes}-node replica, ` +
          `or fit it on one node (nodes: 1, gpus_per_node: ${profile.tp * profile.pp})`,
      );
    }
    return [...problems, ...checkDevices(profile, devices)];
  },

  commands(launch) {
    if (launch.ranks > 1) {
      throw new LlmgwError(
        'invalid_argument',
        `replica ${launch.replica} spans ${launch.ranks} nodes, which trtllm does not under llmgw: use engine: vllm or sglang`,
      );
    }
    return [trtllmServe(launch)];
  },

  label: 'TensorRT-LLM',
  runsOnCpu: false,
  formats: ['safetensors'],
  split: 'tensor',
  cardFlags: {
    cards: ['--tp_size', '--tensor_parallel_size'],
    pp: ['--pp_size', '--pipeline_parallel_size'],
  },
  context: {
    fixed:
      'whose context is fixed when its engine is built (max_seq_len, max_num_tokens): build the engine again for the new context and apply the model with it (llmgw ctl model apply -f FILE), or leave that profile out',
  },
  // It warns past the trained context, and starts.
  budget: trtllmBudget,
  // 1.3.0rc5: the tag of NVIDIA's quick start guide (nvidia.github.io/TensorRT-LLM/quick-start-guide.html);
  // TensorRT-LLM's images are all release candidates lately.
  defaultImage: () => 'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5',
  imageExecutable: 'trtllm-serve',
  defaultBin: 'trtllm-serve',
  onNode: { bin: 'trtllm-serve' },
  noAdapters:
    'llmgw does not serve LoRA adapters on trtllm yet: serve them with engine: vllm, sglang or llamacpp',
  ownedFlags: ['--host', '--port'],
  ownedEnv: {},
  capacity: (args) => wholeFlag(args, ['--max_batch_size']) ?? 256,
};

function trtllmServe(launch: ShardLaunch): ProcessSpec {
  const { profile, model, settings } = launch;
  const own = profile.args;
  const args = [launch.weights.path, '--host', launch.host, '--port', String(launch.port)];
  if (profile.tp > 1) args.push(...unlessSet(own, ['--tp_size', '--tensor_parallel_size'], profile.tp));
  if (profile.pp > 1) args.push(...unlessSet(own, ['--pp_size', '--pipeline_parallel_size'], profile.pp));
  if (model.context_length !== undefined)
    args.push(...unlessSet(own, ['--max_seq_len'], model.context_length));
  args.push(...own);
  return { name: 'trtllm-serve', bin: settings.bin, args, env: shardEnv(launch) };
}
