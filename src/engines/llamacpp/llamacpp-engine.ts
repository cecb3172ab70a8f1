import { join } from 'node:path';

import { LlmgwError } from '../../core/errors.js';
import { flagValue, hasFlag, unlessSet, wholeFlag } from '../args.js';
import { checkDevices } from '../check-devices.js';
import { onMig, shardEnv } from '../device-env.js';
import { ggufWeights } from './gguf-weights.js';
import type { Engine, ProcessSpec, ShardLaunch, Weights } from '../types.js';

import { LLAMACPP_DEFAULT_SLOTS, llamacppBudget } from './llamacpp-budget.js';

/** Requests at once, each slot with the whole context. */
const SLOT_FLAGS = ['--parallel', '-np'] as const;

/**
 * llama.cpp's `llama-server`: the engine that makes a node without GPUs useful, and the
 * one for GGUF weights on any card. A replica is one process on one node; several cards
 * of that node share the model by layer.
 *
 * Behaviour relied on here was observed on build 10587 (captures in
 * shared/reference/llama-server/).
 */
export const llamacppEngine: Engine = {
  name: 'llamacpp',
  healthPath: '/health',
  metricsPath: '/metrics',
  loadMetrics: {
    running: 'llamacpp:requests_processing',
    waiting: 'llamacpp:requests_deferred',
  },
  // It listens before the model is loaded and answers 503 "Loading model" until then.
  loading: 'answers-503',
  // A llama.cpp replica is always rank 0 of 1.
  servesHttp: (rank) => rank === 0,
  servesResponses: false,
  // llama.cpp loads adapters at scale 0 and applies them per request by position.
  selectAdapter(body, adapter, loaded) {
    body['lora'] = [{ id: loaded.indexOf(adapter), scale: 1 }];
  },
  // The agent installs llama-server from llama.cpp's release archives where none is configured.
  installedByAgent: true,
  // One GGUF file (the first part of a split one) and its projector.
  fetchedWeights: ggufWeights,

  validate(profile, devices) {
    return [...splitProblems(profile).map((p) => p.message), ...checkDevices(profile, devices)];
  },

  commands(launch) {
    return [llamaServer(launch)];
  },

  label: 'llama.cpp',
  runsOnCpu: true,
  formats: ['gguf'],
  split: 'layer',
  // Proportions per card: written for a count of cards, wrong for another.
  cardFlags: { cards: ['--tensor-split', '-ts'], pp: [] },
  slots: { flags: SLOT_FLAGS, default: LLAMACPP_DEFAULT_SLOTS },
  context: { flags: ['--ctx-size', '-c'] },
  // It warns past the trained context, and starts.
  cardsProblem(args, cards) {
    // --split-mode none keeps the whole model on its main card, whatever it is given.
    if (cards <= 1 || flagValue(args, '--split-mode', '-sm') !== 'none') return undefined;
    return (
      `llama.cpp with --split-mode none, which keeps the whole model on one card however many it is given: ` +
      `remove it from the profile's args to split the layers over ${cards} cards`
    );
  },
  budget: llamacppBudget,
  // ggml-org's own images, tagged `server-cuda-<build>` / `server-<build>` for every release; the
  // build is the one the process path installs (`agent.engines.llamacpp.build`).
  defaultImage: ({ gpu, llamaBuild }) =>
    `ghcr.io/ggml-org/llama.cpp:server-${gpu ? 'cuda-' : ''}${llamaBuild}`,
  // Its images keep llama-server at /app, off PATH.
  imageExecutable: '/app/llama-server',
  // The agent installs its own build, else takes the configured one; this is the last resort.
  defaultBin: 'llama-server',
  splitProblems,
  ownedFlags: ['--host', '--port', '--api-key', '--api-key-file', '--model', '-m'],
  ownedEnv: {
    GGML_VK_VISIBLE_DEVICES: 'placement sets it to the devices it chose',
    LLAMA_API_KEY: 'the gateway holds the engine key',
  },
  capacity: (args, defaultSlots) => wholeFlag(args, SLOT_FLAGS) ?? defaultSlots,
};

/**
 * It has no tensor parallelism and no group spanning machines: accepting either would run a
 * replica on fewer cards, or one machine, while the catalog believes otherwise.
 */
function splitProblems(p: { tp: number; pp: number; nodes: number }) {
  const problems: { key: 'tp' | 'pp' | 'nodes'; message: string }[] = [];
  if (p.nodes > 1) {
    problems.push({
      key: 'nodes',
      message: `llamacpp does not span nodes: use engine: vllm or sglang for a ${p.nodes}-node replica`,
    });
  }
  if (p.tp > 1 || p.pp > 1) {
    problems.push({
      key: p.tp > 1 ? 'tp' : 'pp',
      message: `llamacpp splits a model across a node's GPUs by layer, not by tp or pp: write gpus_per_node: ${p.tp * p.pp} instead`,
    });
  }
  return problems;
}

function llamaServer(launch: ShardLaunch): ProcessSpec {
  const { profile, model, devices, settings } = launch;
  const own = profile.args;
  const weights = ggufIn(launch.weights);
  const gpus = devices.length;

  const args = [
    '--model',
    weights.model,
    '--host',
    launch.host,
    '--port',
    String(launch.port),
    // Without it there is no /metrics, and the router would route to this replica blind.
    '--metrics',
  ];
  // Pinned rather than left to the build's default (on in recent builds, off in older
  // ones): the model's own template is what renders tools the way it was trained to read
  // them, and an engine upgrade should not change how prompts are built.
  if (!hasFlag(own, '--jinja', '--no-jinja')) args.push('--jinja');
  // The catalog's name, so /v1/models and every answer's `model` say what clients asked for.
  args.push(...unlessSet(own, ['--alias', '-a'], profile.served_model_name ?? model.name));
  if (weights.projector !== undefined) args.push(...unlessSet(own, ['--mmproj', '-mm'], weights.projector));

  // llama.cpp's own default is one slot (or "auto" in recent builds): one request at a
  // time would make every other wait, whatever the router decided.
  const parallelSet = flagValue(own, '--parallel', '-np');
  const parallel =
    parallelSet === undefined
      ? settings.llamacpp.parallel > 0
        ? settings.llamacpp.parallel
        : 4
      : Number(parallelSet);
  if (parallelSet === undefined) args.push('--parallel', String(parallel));

  // llama-server divides -c among its slots (--ctx-size 4096 --parallel 4 gives each slot
  // 1024: capture 80-ctx4096-parallel4.txt). Asking for the model's context times the
  // slots gives every request the whole context_length the catalog promises. With an
  // automatic slot count (-np -1, unified KV) each slot may use all of -c, so -c alone.
  if (model.context_length !== undefined && !hasFlag(own, '--ctx-size', '-c')) {
    const slots = Number.isInteger(parallel) && parallel > 0 ? parallel : 1;
    args.push('--ctx-size', String(model.context_length * slots));
  }

  if (gpus > 0) {
    // Everything on the cards placement gave; llama.cpp would otherwise keep layers on the
    // CPU. On a CPU shard the flag is left out, as the CPU placement asked for no GPU.
    args.push(...unlessSet(own, ['--n-gpu-layers', '-ngl', '--gpu-layers'], 999));
    // By layer: the only split llama.cpp makes without a matched interconnect, in
    // proportion to each card's free memory (even, for the whole cards placement gives).
    if (gpus > 1) args.push(...unlessSet(own, ['--split-mode', '-sm'], 'layer'));
  } else if (!hasFlag(own, '--threads', '-t')) {
    args.push('--threads', String(cpuThreads(launch)));
  }

  // Loaded at scale 0 and applied per request ("lora": [{"id": i, "scale": s}]), so a
  // request naming no adapter gets the base model. --lora would load each at scale 1 and
  // apply it to every request without a "lora" of its own. FILE:SCALE is the form build
  // 10587 accepts; the two-argument form exits 1 (captures 60-lora-scaled-*.txt). One flag
  // per adapter, in order: adapter i is id i.
  for (const a of profile.adapters) {
    if (/[,:]/.test(a.path)) {
      throw new LlmgwError(
        'invalid_argument',
        `adapter "${a.name}" is at ${a.path}, whose "," or ":" llama-server's --lora-scaled FILE:SCALE cannot carry: keep adapters at a path without them`,
      );
    }
    args.push('--lora-scaled', `${a.path}:0`);
  }
  // Last, so that a flag the profile sets is the one the engine keeps.
  args.push(...own);

  const env = shardEnv(launch, launch.apiKey === '' ? {} : { LLAMA_API_KEY: launch.apiKey });
  // The Vulkan build does not read CUDA_VISIBLE_DEVICES; this is its own. Vulkan lists an
  // NVIDIA node's cards in bus order, as nvidia-smi does; if a node listed them otherwise,
  // the shard would hold memory on other cards, which the agent's start check sees.
  // Never on MIG: Vulkan cannot open an instance, and an index would name another card.
  // Empty on a CPU shard, which hides every Vulkan device, as CUDA_VISIBLE_DEVICES does.
  if (!onMig(devices)) env['GGML_VK_VISIBLE_DEVICES'] = devices.map((d) => d.card).join(',');

  return { name: 'llama-server', bin: settings.bin, args, env };
}

/**
 * CPU threads of a CPU shard: what placement reserved, else the setting, else half the
 * CPUs. Not all of them, llama.cpp's own default: two servers spinning on every CPU fight
 * for them and both crawl.
 */
function cpuThreads(launch: ShardLaunch): number {
  if (launch.threads !== undefined && launch.threads > 0) return launch.threads;
  if (launch.settings.llamacpp.threads > 0) return launch.settings.llamacpp.threads;
  return Math.max(Math.floor(launch.settings.cpuCount / 2), 1);
}

/**
 * The model file (and vision projector) of the weights. A file is used as it is, with the
 * projector the agent found for it (a fetched model's mmproj). A directory — what a multi-file download becomes — gives its first .gguf in name order,
 * which for a split model is part -00001-of-0000N (llama.cpp finds the others beside it),
 * and its mmproj file, which is the projector and not the model.
 */
export function ggufIn(weights: Weights): { model: string; projector?: string } {
  if (weights.files === undefined)
    return {
      model: weights.path,
      ...(weights.projector === undefined ? {} : { projector: weights.projector }),
    };
  const ggufs = weights.files.filter((f) => f.toLowerCase().endsWith('.gguf')).sort();
  const projectors = ggufs.filter((f) => f.toLowerCase().includes('mmproj'));
  const models = ggufs.filter((f) => !f.toLowerCase().includes('mmproj'));
  const first = models[0];
  if (first === undefined) {
    if (projectors.length > 0) {
      throw new LlmgwError(
        'invalid_argument',
        `${weights.path} holds a vision projector (${projectors.join(', ')}) and no model: point source at the model's .gguf, or put it beside the projector`,
      );
    }
    const found =
      weights.files.length === 0
        ? 'it is empty'
        : `it has ${weights.files.slice(0, 5).join(', ')}${weights.files.length > 5 ? ', …' : ''}`;
    throw new LlmgwError(
      'invalid_argument',
      `${weights.path} holds no .gguf file: llamacpp serves GGUF weights, and ${found}; point source at a .gguf file, or use engine: vllm or sglang for these`,
    );
  }
  const projector = projectors[0];
  return {
    model: join(weights.path, first),
    ...(projector === undefined ? {} : { projector: join(weights.path, projector) }),
  };
}

/**
 * The devices a llama-server build can compute on, from `llama-server --list-devices`:
 * the lines after "Available devices:" ("CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free)").
 * Empty on a machine with GPUs means the build's GPU backend did not load.
 */
export function parseListDevices(output: string): string[] {
  const lines = output.split('\n').map((l) => l.trim());
  const start = lines.findIndex((l) => l.startsWith('Available devices'));
  if (start < 0) return [];
  return lines.slice(start + 1).filter((l) => l !== '' && l !== '(none)');
}

/** The build of `llama-server --version` (printed on stderr): `version: 0.2.0-dev (build 10587, commit 3f545becc)`. */
export function parseVersion(output: string): { build: number; commit: string } | undefined {
  const m = /\(build (\d+), commit ([0-9a-f]+)\)/.exec(output);
  if (m?.[1] === undefined || m[2] === undefined) return undefined;
  return { build: Number(m[1]), commit: m[2] };
}
