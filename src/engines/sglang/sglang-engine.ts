import { LlmgwError } from '../../core/errors.js';
import { hasFlag, unlessSet, wholeFlag } from '../args.js';
import { checkDevices, gpuOnly } from '../check-devices.js';
import { shardEnv } from '../device-env.js';
import { snapshotWeights } from '../snapshot-weights.js';
import { adapterAsModel, type Engine, type ProcessSpec, type ShardLaunch } from '../types.js';

import { sglangBudget } from './sglang-budget.js';

/**
 * SGLang, as `python3 -m sglang.launch_server --model-path MODEL`. The module form rather
 * than `sglang serve`: every SGLang release has it (the `sglang` command is recent), and
 * settings.sglang.bin then names the Python of the environment SGLang is installed in,
 * which is how it is installed (a venv or a container), whatever is first on PATH.
 *
 * Across nodes every rank runs the same command with its own --node-rank; rank 0 serves
 * HTTP.
 */
export const sglangEngine: Engine = {
  name: 'sglang',
  healthPath: '/health',
  metricsPath: '/metrics',
  loadMetrics: {
    running: 'sglang:num_running_reqs',
    waiting: 'sglang:num_queue_reqs',
    kvUsage: 'sglang:token_usage',
  },
  // Nothing listens while the weights load.
  loading: 'refuses-connections',
  servesHttp: (rank) => rank === 0,
  servesResponses: true,
  selectAdapter: adapterAsModel,
  // Installed by the node's operator (pip, the image), never by the agent.
  installedByAgent: false,
  // It reads the Hugging Face snapshot as it is.
  fetchedWeights: snapshotWeights,

  validate(profile, devices) {
    return [...gpuOnly('sglang', profile), ...checkDevices(profile, devices)];
  },

  commands(launch) {
    return [launchServer(launch)];
  },

  label: 'SGLang',
  runsOnCpu: false,
  formats: ['safetensors'],
  split: 'tensor',
  cardFlags: {
    cards: ['--tp-size', '--tp', '--tensor-parallel-size'],
    pp: ['--pp-size', '--pipeline-parallel-size'],
  },
  context: { flags: ['--context-length'] },
  pastTrained: (context, trained) =>
    `User-specified context_length (${context}) is greater than the derived context_length (${trained})`,
  budget: sglangBudget,
  // v0.5.19-cu129: SGLang's installation guide (docs/get-started/install.mdx) names it the last
  // CUDA 12 image; the CUDA 13 ones after it need a 580+ driver, which many nodes lack.
  defaultImage: () => 'lmsysorg/sglang:v0.5.19-cu129',
  // `python3 -m sglang.launch_server`, as on the host.
  imageExecutable: 'python3',
  // The Python it is installed for (a venv's, or the system's).
  defaultBin: 'python3',
  onNode: { pythonModule: 'sglang', launch: 'python3 -m sglang.launch_server' },
  ownedFlags: ['--host', '--port', '--api-key', '--model-path'],
  ownedEnv: {},
  capacity: (args) => wholeFlag(args, ['--max-running-requests']) ?? 256,
};

function launchServer(launch: ShardLaunch): ProcessSpec {
  const { profile, model, settings } = launch;
  const own = profile.args;
  const http = sglangEngine.servesHttp(launch.rank, launch.ranks);

  const args = ['-m', 'sglang.launch_server', '--model-path', launch.weights.path];
  if (http) {
    args.push('--host', launch.host, '--port', String(launch.port));
    // SGLang reads its key from --api-key alone (ServerArgs.api_key has no environment
    // variable), so it is on the command line, where `ps` on this node shows it. It only
    // guards this engine, which binds where the agent says; the gateway's keys are not it.
    if (launch.apiKey !== '') args.push('--api-key', launch.apiKey);
  }
  args.push(...unlessSet(own, ['--served-model-name'], profile.served_model_name ?? model.name));
  if (profile.tp > 1)
    args.push(...unlessSet(own, ['--tp-size', '--tp', '--tensor-parallel-size'], profile.tp));
  if (profile.pp > 1) args.push(...unlessSet(own, ['--pp-size', '--pipeline-parallel-size'], profile.pp));
  if (launch.ranks > 1) args.push(...multiNode(launch));
  if (model.context_length !== undefined)
    args.push(...unlessSet(own, ['--context-length'], model.context_length));
  // SGLang has no /metrics without it, and the router would route blind.
  if (!hasFlag(own, '--enable-metrics')) args.push('--enable-metrics');

  if (profile.adapters.length > 0) {
    if (!hasFlag(own, '--enable-lora')) args.push('--enable-lora');
    if (!hasFlag(own, '--lora-paths'))
      args.push('--lora-paths', ...profile.adapters.map((a) => `${a.name}=${a.path}`));
  }
  args.push(...own);

  return { name: 'sglang', bin: settings.bin, args, env: shardEnv(launch) };
}

/** Every rank names the head's rendezvous address (torch.distributed) and its own rank. */
function multiNode(launch: ShardLaunch): string[] {
  if (launch.head === undefined) {
    throw new LlmgwError(
      'internal',
      `replica ${launch.replica} spans ${launch.ranks} nodes but its launch names no head address: placement must give one`,
    );
  }
  return [
    '--nnodes',
    String(launch.ranks),
    '--node-rank',
    String(launch.rank),
    '--dist-init-addr',
    `${hostPort(launch.head.address)}:${launch.head.port}`,
  ];
}

/** An IPv6 address in brackets, so that the port after it stays readable. */
function hostPort(address: string): string {
  return address.includes(':') && !address.startsWith('[') ? `[${address}]` : address;
}
