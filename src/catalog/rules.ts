import { type Issue, LlmgwError } from '../core/errors.js';
import { dnsLabelProblem } from '../core/names.js';

import { gpuClassProblem, isMigClass, parseGpuClass } from './gpu-class.js';
import type { CatalogEngine } from './catalog-engine.js';
import type { ModelSpec, ProfileSpec, RuntimeName } from './model-spec.js';
import { imageProblem } from './image-ref.js';
import { adapterPathProblem, sourceProblem } from './source-rule.js';

/**
 * What each engine and device class accepts, checked across keys. Every message says
 * what to write instead: these are read by someone fixing a YAML file.
 */

type Path = (string | number)[];
type ParsedProfile = Omit<ProfileSpec, 'tp' | 'pp' | 'gpus_per_node' | 'nodes' | 'runtime'> &
  Partial<Pick<ProfileSpec, 'tp' | 'pp' | 'gpus_per_node' | 'nodes'>> & { runtime?: RuntimeName | undefined };
export type ParsedModel = Omit<ModelSpec, 'profiles'> & { profiles: ParsedProfile[] };

/**
 * Environment variables llmgw sets itself, refused on every profile whatever its engine: the
 * devices placement chose, and what each engine is told (its key, its own device list).
 */
function ownedEnv(engines: readonly CatalogEngine[]): Record<string, string> {
  const own: Record<string, string> = { CUDA_VISIBLE_DEVICES: 'placement sets it to the devices it chose' };
  for (const e of engines) Object.assign(own, e.ownedEnv);
  return own;
}

export function checkModel(
  m: ParsedModel,
  engines: readonly CatalogEngine[],
): { model: ModelSpec; issues: Issue[] } {
  const issues: Issue[] = [];
  const add = (path: Path, message: string) => issues.push({ path, message });

  const nameProblem = dnsLabelProblem('model name', m.name);
  if (nameProblem !== undefined) add(['name'], nameProblem);
  const src = sourceProblem(m.source);
  if (src !== undefined) add(['source'], src);
  if (m.max_output !== undefined && m.context_length !== undefined && m.max_output > m.context_length) {
    add(
      ['max_output'],
      `${m.max_output} is more than context_length (${m.context_length}): write max_output: ${m.context_length} or less`,
    );
  }

  const a = m.autoscale;
  if (a !== undefined && a.min > a.max) {
    add(
      ['autoscale', 'min'],
      `min (${a.min}) is more than max (${a.max}): write min: ${a.max} or less, or max: ${a.min} or more`,
    );
  }

  const seen = new Set<string>();
  const profiles = m.profiles.map((p, i) => {
    if (seen.has(p.name))
      add(['profiles', i, 'name'], `profile "${p.name}" is named twice: give each profile its own name`);
    seen.add(p.name);
    return checkProfile(p, {
      engines,
      add: (path, message) => add(['profiles', i, ...path], message),
    });
  });
  const model: ModelSpec = {
    name: m.name,
    source: m.source,
    ...(m.context_length === undefined ? {} : { context_length: m.context_length }),
    ...(m.max_output === undefined ? {} : { max_output: m.max_output }),
    replicas: m.replicas,
    ...(a === undefined ? {} : { autoscale: { min: a.min, max: a.max, target: a.target, idle_s: a.idle_s } }),
    profiles,
  };
  return { model, issues };
}

function checkProfile(
  p: ParsedProfile,
  { engines, add }: { engines: readonly CatalogEngine[]; add: (path: Path, message: string) => void },
): ProfileSpec {
  const engine = engines.find((e) => e.name === p.engine);
  // The schema took only these engines' names.
  if (engine === undefined)
    throw new LlmgwError('internal', `profile "${p.name}" names no engine given: ${p.engine}`);
  const nameProblem = dnsLabelProblem('profile name', p.name);
  if (nameProblem !== undefined) add(['name'], nameProblem);

  const tp = p.tp ?? 1;
  const pp = p.pp ?? 1;
  const nodes = p.nodes ?? 1;
  let gpusPerNode = p.gpus_per_node ?? 1;

  if (p.cpu === true && p.gpu_class !== undefined) {
    add(
      ['cpu'],
      `a profile runs on GPUs or on CPUs, not both: remove cpu: true, or remove gpu_class: ${p.gpu_class}`,
    );
  } else if (p.cpu !== true && p.gpu_class === undefined) {
    add(
      [],
      'say where it runs: write gpu_class (e.g. gpu_class: a100-80g, or a MIG instance such as a100-80g-mig-3g.40gb), or cpu: true',
    );
  }
  if (p.cpu === false)
    add(['cpu'], 'cpu: false says nothing: remove it, and write gpu_class for a GPU profile');

  if (p.cpu === true) {
    if (!engine.runsOnCpu) {
      add(
        ['engine'],
        `${p.engine} does not run on CPUs under llmgw: write engine: ${engines
          .filter((e) => e.runsOnCpu)
          .map((e) => e.name)
          .join(' or ')} for cpu: true, or give a gpu_class`,
      );
    }
    for (const key of ['tp', 'pp', 'gpus_per_node', 'nodes'] as const) {
      const v = p[key];
      if (v !== undefined && v > 1)
        add([key], `a CPU profile is one process on one node: remove ${key}: ${v}`);
    }
    gpusPerNode = 0;
  } else if (p.gpu_class !== undefined) {
    if (p.gpus_per_node === 0)
      add(
        ['gpus_per_node'],
        'a GPU profile takes at least one card: write gpus_per_node: 1 or more, or cpu: true',
      );
    const classProblem = gpuClassProblem(p.gpu_class);
    if (classProblem !== undefined) add(['gpu_class'], classProblem);
    else if (isMigClass(p.gpu_class)) {
      for (const key of ['tp', 'pp', 'gpus_per_node', 'nodes'] as const) {
        const v = p[key];
        if (v !== undefined && v > 1) {
          add(
            [key],
            `${p.gpu_class} is a MIG instance, and a replica runs on exactly one (a process opens one MIG device, and instances ` +
              `have no NVLink or P2P between them): remove ${key}: ${v}, or use a whole-card class such as ${parseGpuClass(p.gpu_class)?.card ?? 'a100-80g'}`,
          );
        }
      }
    }
    if (engine.split === 'layer') {
      for (const { key, message } of engine.splitProblems?.({ tp, pp, nodes }) ?? []) add([key], message);
    } else {
      if (p.gpus_per_node === undefined) {
        // Tensor times pipeline parallel is the cards of a replica, spread over its nodes.
        gpusPerNode = (tp * pp) % nodes === 0 ? (tp * pp) / nodes : 1;
      }
      if (tp * pp !== gpusPerNode * nodes) {
        add(
          p.gpus_per_node === undefined ? ['nodes'] : ['gpus_per_node'],
          `tp (${tp}) × pp (${pp}) is ${tp * pp} cards, but gpus_per_node (${gpusPerNode}) × nodes (${nodes}) is ${gpusPerNode * nodes}: ` +
            `they must be equal; write ${suggestParallel(tp, pp, nodes)}`,
        );
      }
    }
  }

  if (engine.noAdapters !== undefined && p.adapters.length > 0) add(['adapters'], engine.noAdapters);
  const adapterNames = new Set<string>();
  p.adapters.forEach((a, i) => {
    const problem = dnsLabelProblem('adapter name', a.name);
    if (problem !== undefined) add(['adapters', i, 'name'], problem);
    const pathProblem = adapterPathProblem(a);
    if (pathProblem !== undefined) add(['adapters', i, 'path'], pathProblem);
    if (adapterNames.has(a.name))
      add(['adapters', i, 'name'], `adapter "${a.name}" is named twice: give each adapter its own name`);
    adapterNames.add(a.name);
  });

  const owned = ownedEnv(engines);
  for (const key of Object.keys(p.env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key))
      add(['env', key], `"${key}" is not an environment variable name: use letters, digits and _`);
    const owner = owned[key];
    if (owner !== undefined) add(['env', key], `llmgw sets ${key} itself (${owner}): remove it from env`);
  }
  p.args.forEach((arg, i) => {
    const flag = arg.split('=')[0] ?? arg;
    if (engine.ownedFlags.includes(flag)) {
      add(
        ['args', i],
        `llmgw sets ${flag} itself (from placement, the model's source and the gateway's key): remove it from args`,
      );
    }
  });
  if (p.served_model_name !== undefined && /\s/.test(p.served_model_name)) {
    add(
      ['served_model_name'],
      `"${p.served_model_name}" has white space, which clients cannot send as a model name: remove it`,
    );
  }

  if (p.image !== undefined) {
    if (p.runtime !== 'container')
      add(
        ['image'],
        `an image runs only as a container: write runtime: container beside image: ${p.image}, or remove image to run ${p.engine} as a host process`,
      );
    const problem = imageProblem(p.image);
    if (problem !== undefined) add(['image'], problem);
  }

  // Keys in the order people read them, whatever order they were written in.
  return {
    name: p.name,
    engine: p.engine,
    ...(p.gpu_class === undefined ? {} : { gpu_class: p.gpu_class }),
    ...(p.cpu === undefined ? {} : { cpu: p.cpu }),
    tp,
    pp,
    gpus_per_node: gpusPerNode,
    nodes,
    args: p.args,
    env: p.env,
    ...(p.served_model_name === undefined ? {} : { served_model_name: p.served_model_name }),
    adapters: p.adapters,
    ...(p.min_memory_gb === undefined ? {} : { min_memory_gb: p.min_memory_gb }),
    // A process is the default, and reads back without the key (as every profile before containers).
    ...(p.runtime === 'container' ? { runtime: 'container' as const } : {}),
    ...(p.image === undefined ? {} : { image: p.image }),
  };
}

function suggestParallel(tp: number, pp: number, nodes: number): string {
  const cards = tp * pp;
  if (cards % nodes === 0) return `gpus_per_node: ${cards / nodes}`;
  return `tp and pp whose product is a multiple of nodes (${nodes})`;
}
