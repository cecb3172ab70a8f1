import { describe, expect, it } from 'vitest';

import { formatIssues } from '../core/errors.js';

import { engines } from '../../test/support/engines.js';
import { validateModel as validateWith, validateModels as validateAllWith } from './validate.js';

// The catalog is given the engines it checks against: the registry's, as the control plane gives them.
const validateModel = (input: unknown) => validateWith(input, engines);
const validateModels = (input: readonly unknown[]) => validateAllWith(input, engines);

const base = { name: 'llama-8b', source: '/models/llama-8b.gguf' };
const gpu = (profile: Record<string, unknown>) => ({ ...base, profiles: [{ name: 'main', ...profile }] });

/** Each refusal: the model, the path of the problem and the words that say what to write instead. */
const refusals: [string, unknown, string, string][] = [
  [
    'a model name that is no DNS label',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), name: 'Qwen2.5_7B' },
    'name',
    'write "qwen2-5-7b" instead',
  ],
  [
    'a profile name that is no DNS label',
    gpu({ name: 'Big GPU', engine: 'vllm', gpu_class: 'l4-24g' }),
    'profiles[0].name',
    'write "big-gpu" instead',
  ],
  [
    'an unknown model key',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), contex_length: 4096 },
    'contex_length',
    'did you mean "context_length"?',
  ],
  [
    'an unknown profile key',
    gpu({ engine: 'vllm', gpu_clas: 'l4-24g' }),
    'profiles[0].gpu_clas',
    'did you mean "gpu_class"?',
  ],
  [
    'an unknown engine',
    gpu({ engine: 'vlm', gpu_class: 'l4-24g' }),
    'profiles[0].engine',
    'did you mean "vllm"?',
  ],
  [
    'a relative source',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), source: 'models/x.gguf' },
    'source',
    'write an absolute path',
  ],
  [
    'a malformed hf id',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), source: 'hf://just-org' },
    'source',
    'model source "hf://just-org" does not name a repository: write hf://ORG/REPO, for example hf://Qwen/Qwen2.5-7B-Instruct',
  ],
  [
    'a huggingface.co address without scheme',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), source: 'huggingface.co/Qwen/Qwen2.5-7B' },
    'source',
    'write the Hugging Face repository as "hf://Qwen/Qwen2.5-7B"',
  ],
  [
    'a repository id without hf://',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), source: 'Qwen/Qwen2.5-7B' },
    'source',
    'for a Hugging Face repository write hf://Qwen/Qwen2.5-7B',
  ],
  [
    'a URL with a password in it',
    { ...gpu({ engine: 'llamacpp', cpu: true }), source: 'https://u:pw@example.org/m.gguf' },
    'source',
    'carries a user name or password: put no secret in a model source',
  ],
  [
    'an empty revision',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), source: 'hf://Qwen/Qwen2.5-7B@' },
    'source',
    'has an empty revision after @: name a branch, tag or commit',
  ],
  ['no place to run', gpu({ engine: 'vllm' }), 'profiles[0]', 'write gpu_class (e.g. gpu_class: a100-80g'],
  [
    'GPU and CPU at once',
    gpu({ engine: 'llamacpp', cpu: true, gpu_class: 'l4-24g' }),
    'profiles[0].cpu',
    'not both: remove cpu: true, or remove gpu_class: l4-24g',
  ],
  [
    'cpu: false',
    gpu({ engine: 'vllm', cpu: false, gpu_class: 'l4-24g' }),
    'profiles[0].cpu',
    'cpu: false says nothing',
  ],
  [
    'a CPU profile on vllm',
    gpu({ engine: 'vllm', cpu: true }),
    'profiles[0].engine',
    'write engine: llamacpp for cpu: true',
  ],
  [
    'a CPU profile across nodes',
    gpu({ engine: 'llamacpp', cpu: true, nodes: 2 }),
    'profiles[0].nodes',
    'a CPU profile is one process on one node: remove nodes: 2',
  ],
  [
    'an upper-case class',
    gpu({ engine: 'vllm', gpu_class: 'A100-80G' }),
    'profiles[0].gpu_class',
    'write it in lower case: "a100-80g"',
  ],
  [
    'a class without memory',
    gpu({ engine: 'vllm', gpu_class: 'a100' }),
    'profiles[0].gpu_class',
    'names a card but not its memory: write the model and memory, e.g. "a100-80g"',
  ],
  [
    'a class that is no class',
    gpu({ engine: 'vllm', gpu_class: 'fast-gpu' }),
    'profiles[0].gpu_class',
    'is not a device class',
  ],
  [
    'llama.cpp with tp',
    gpu({ engine: 'llamacpp', gpu_class: 'a100-80g', tp: 2 }),
    'profiles[0].tp',
    'write gpus_per_node: 2 instead',
  ],
  [
    'llama.cpp with pp',
    gpu({ engine: 'llamacpp', gpu_class: 'a100-80g', pp: 4 }),
    'profiles[0].pp',
    'write gpus_per_node: 4 instead',
  ],
  [
    'llama.cpp across nodes',
    gpu({ engine: 'llamacpp', gpu_class: 'a100-80g', nodes: 2 }),
    'profiles[0].nodes',
    'llamacpp does not span nodes: use engine: vllm or sglang for a 2-node replica',
  ],
  [
    'MIG with tp',
    gpu({ engine: 'vllm', gpu_class: 'a100-80g-mig-3g.40gb', tp: 2 }),
    'profiles[0].tp',
    'a replica runs on exactly one',
  ],
  [
    'MIG with pp',
    gpu({ engine: 'sglang', gpu_class: 'h100-80g-mig-3g.40gb', pp: 2 }),
    'profiles[0].pp',
    'use a whole-card class such as h100-80g',
  ],
  [
    'MIG with gpus_per_node',
    gpu({ engine: 'llamacpp', gpu_class: 'a100-80g-mig-1g.10gb', gpus_per_node: 2 }),
    'profiles[0].gpus_per_node',
    'remove gpus_per_node: 2',
  ],
  [
    'MIG across nodes',
    gpu({ engine: 'vllm', gpu_class: 'h200-141g-mig-1c.3g.71gb', nodes: 2 }),
    'profiles[0].nodes',
    'remove nodes: 2',
  ],
  [
    'tp × pp not the cards',
    gpu({ engine: 'vllm', gpu_class: 'a100-80g', tp: 2, gpus_per_node: 4 }),
    'profiles[0].gpus_per_node',
    'tp (2) × pp (1) is 2 cards, but gpus_per_node (4) × nodes (1) is 4: they must be equal; write gpus_per_node: 2',
  ],
  [
    'tp over nodes not divisible',
    gpu({ engine: 'vllm', gpu_class: 'a100-80g', tp: 3, nodes: 2 }),
    'profiles[0].nodes',
    'tp and pp whose product is a multiple of nodes (2)',
  ],
  [
    'a GPU profile of no cards',
    gpu({ engine: 'vllm', gpu_class: 'a100-80g', gpus_per_node: 0 }),
    'profiles[0].gpus_per_node',
    'a GPU profile takes at least one card',
  ],
  [
    'zero tp',
    gpu({ engine: 'vllm', gpu_class: 'a100-80g', tp: 0 }),
    'profiles[0].tp',
    'must be at least 1, got 0',
  ],
  [
    'LoRA on trtllm',
    gpu({ engine: 'trtllm', gpu_class: 'h100-80g', adapters: [{ name: 'sql', path: '/a' }] }),
    'profiles[0].adapters',
    'serve them with engine: vllm, sglang or llamacpp',
  ],
  [
    'an adapter name that is no DNS label',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', adapters: [{ name: 'My_SQL', path: '/a' }] }),
    'profiles[0].adapters[0].name',
    'write "my-sql" instead',
  ],
  [
    'two adapters of one name',
    gpu({
      engine: 'vllm',
      gpu_class: 'l4-24g',
      adapters: [
        { name: 'a', path: '/a' },
        { name: 'a', path: '/b' },
      ],
    }),
    'profiles[0].adapters[1].name',
    'adapter "a" is named twice',
  ],
  [
    'an env var placement owns',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', env: { CUDA_VISIBLE_DEVICES: '0' } }),
    'profiles[0].env.CUDA_VISIBLE_DEVICES',
    'llmgw sets CUDA_VISIBLE_DEVICES itself (placement sets it',
  ],
  [
    'an engine key in env',
    gpu({ engine: 'llamacpp', gpu_class: 'l4-24g', env: { LLAMA_API_KEY: 'x' } }),
    'profiles[0].env.LLAMA_API_KEY',
    'the gateway holds the engine key',
  ],
  [
    'a bad env name',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', env: { 'MY-VAR': '1' } }),
    'profiles[0].env.MY-VAR',
    'is not an environment variable name',
  ],
  [
    '--port in args',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', args: ['--port', '9000'] }),
    'profiles[0].args[0]',
    'llmgw sets --port itself',
  ],
  [
    '--api-key= in args',
    gpu({ engine: 'llamacpp', cpu: true, args: ['--api-key=x'] }),
    'profiles[0].args[0]',
    'llmgw sets --api-key itself',
  ],
  [
    '--model in llama.cpp args',
    gpu({ engine: 'llamacpp', cpu: true, args: ['-m', '/x.gguf'] }),
    'profiles[0].args[0]',
    'llmgw sets -m itself',
  ],
  [
    'a served name with spaces',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', served_model_name: 'my model' }),
    'profiles[0].served_model_name',
    'has white space',
  ],
  [
    'two profiles of one name',
    {
      ...base,
      profiles: [
        { name: 'p', engine: 'vllm', gpu_class: 'l4-24g' },
        { name: 'p', engine: 'llamacpp', cpu: true },
      ],
    },
    'profiles[1].name',
    'profile "p" is named twice',
  ],
  ['no profile', { ...base, profiles: [] }, 'profiles', 'a model needs at least one profile'],
  [
    'max_output over the context',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), context_length: 4096, max_output: 8192 },
    'max_output',
    'write max_output: 4096 or less',
  ],
  [
    'a tiny context',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), context_length: 100 },
    'context_length',
    'a context is a whole number of tokens from 256 to 16777216, not 100',
  ],
  [
    'negative replicas',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), replicas: -1 },
    'replicas',
    'must be at least 0, got -1',
  ],
  [
    'replicas as text',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), replicas: 'two' },
    'replicas',
    'got "two"',
  ],
  [
    'autoscale with min over max',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: 3, max: 2 } },
    'autoscale.min',
    'min (3) is more than max (2): write min: 2 or less, or max: 3 or more',
  ],
  [
    'autoscale with max 0',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: 0, max: 0 } },
    'autoscale.max',
    'at least 1 replica',
  ],
  [
    'autoscale with a negative min',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: -1, max: 2 } },
    'autoscale.min',
    'at least 0 replicas',
  ],
  [
    'an autoscale target of 0',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: 1, max: 2, target: 0 } },
    'autoscale.target',
    'more than 0, e.g. target: 0.7',
  ],
  [
    'an autoscale target over 1',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: 1, max: 2, target: 70 } },
    'autoscale.target',
    'at most 1 (every slot busy)',
  ],
  [
    'an autoscale idle_s of 0',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: 0, max: 2, idle_s: 0 } },
    'autoscale.idle_s',
    'at least 1 s, e.g. idle_s: 300',
  ],
  [
    'autoscale without max',
    { ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }), autoscale: { min: 0 } },
    'autoscale.max',
    'a whole number of replicas, e.g. max: 4',
  ],
  [
    'an image without runtime: container',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', image: 'vllm/vllm-openai:v0.21.0' }),
    'profiles[0].image',
    'an image runs only as a container: write runtime: container beside image: vllm/vllm-openai:v0.21.0, or remove image to run vllm as a host process',
  ],
  [
    'an image with runtime: process',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'process', image: 'vllm/vllm-openai:v0.21.0' }),
    'profiles[0].image',
    'write runtime: container beside image',
  ],
  [
    'an unknown runtime',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'docker' }),
    'profiles[0].runtime',
    'runtime: process (the default) or runtime: container',
  ],
  [
    'an image in upper case',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'container', image: 'VLLM/vllm-openai:v1' }),
    'profiles[0].image',
    'names are lower case: write "vllm/vllm-openai:v1"',
  ],
  [
    'an image with a scheme',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'container', image: 'https://ghcr.io/a/b:1' }),
    'profiles[0].image',
    'write it without https://: "ghcr.io/a/b:1"',
  ],
  [
    'an image with a bad tag',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'container', image: 'vllm/vllm-openai:.v1' }),
    'profiles[0].image',
    'its tag ".v1" may hold letters, digits',
  ],
  [
    'an image with a short digest',
    gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'container', image: 'vllm/vllm-openai@sha256:abc' }),
    'profiles[0].image',
    'its digest "sha256:abc" is not ALGORITHM:HEX',
  ],
  [
    'a missing source',
    { name: 'x', profiles: [{ name: 'p', engine: 'vllm', gpu_class: 'l4-24g' }] },
    'source',
    'is required',
  ],
];

describe('catalog validation', () => {
  it('fills in autoscale defaults: target 0.7, idle_s 300', () => {
    const r = validateModel({
      ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }),
      autoscale: { min: 0, max: 3 },
    });
    expect(r.ok && r.model.autoscale).toEqual({ min: 0, max: 3, target: 0.7, idle_s: 300 });
  });

  it.each(refusals)('refuses %s', (_what, input, path, words) => {
    const r = validateModel(input);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const text = formatIssues(r.issues);
    expect(text).toContain(path === '' ? words : `${path}: `);
    expect(text).toContain(words);
  });

  const accepted: [string, unknown, Record<string, unknown>][] = [
    [
      'a CPU llama.cpp model',
      gpu({ engine: 'llamacpp', cpu: true }),
      { cpu: true, gpus_per_node: 0, tp: 1, nodes: 1 },
    ],
    [
      'llama.cpp over two cards of a node',
      gpu({ engine: 'llamacpp', gpu_class: 'l40s-48g', gpus_per_node: 2 }),
      { gpus_per_node: 2 },
    ],
    [
      'vllm with tp 4 (cards follow tp)',
      gpu({ engine: 'vllm', gpu_class: 'a100-80g', tp: 4 }),
      { gpus_per_node: 4, tp: 4, pp: 1 },
    ],
    [
      'sglang tp 8 pp 2 over 2 nodes',
      gpu({ engine: 'sglang', gpu_class: 'h100-80g', tp: 8, pp: 2, nodes: 2 }),
      { gpus_per_node: 8, nodes: 2 },
    ],
    [
      'vllm on one MIG instance',
      gpu({ engine: 'vllm', gpu_class: 'a100-80g-mig-3g.40gb' }),
      { gpus_per_node: 1 },
    ],
    [
      'trtllm on whole cards',
      gpu({ engine: 'trtllm', gpu_class: 'h200-141g', tp: 2, gpus_per_node: 2 }),
      { gpus_per_node: 2 },
    ],
    [
      'an hf file source',
      {
        ...gpu({ engine: 'llamacpp', cpu: true }),
        source: 'hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf',
      },
      {},
    ],
    [
      'an hf source pinned to a revision',
      {
        ...gpu({ engine: 'vllm', gpu_class: 'l4-24g' }),
        source: 'hf://Qwen/Qwen2.5-7B-Instruct@a09a35458c702b33eeacc393d103063234e8bc28',
      },
      {},
    ],
    [
      'an https source',
      { ...gpu({ engine: 'llamacpp', cpu: true }), source: 'https://example.org/m.gguf' },
      {},
    ],
    [
      'vllm as a container with its default image (no image key)',
      gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'container' }),
      { runtime: 'container' },
    ],
    [
      'llama.cpp as a container on a registry with a port, by digest',
      gpu({
        engine: 'llamacpp',
        cpu: true,
        runtime: 'container',
        image: `registry.local:5000/ggml-org/llama.cpp:server-b1@sha256:${'a'.repeat(64)}`,
      }),
      {
        runtime: 'container',
        image: `registry.local:5000/ggml-org/llama.cpp:server-b1@sha256:${'a'.repeat(64)}`,
      },
    ],
  ];
  it.each(accepted)('accepts %s, with defaults filled in', (_what, input, expected) => {
    const r = validateModel(input);
    if (!r.ok) throw new Error(formatIssues(r.issues));
    expect(r.model.profiles[0]).toMatchObject({ args: [], env: {}, adapters: [], ...expected });
    expect(r.model.replicas).toBe(1);
  });

  it('accepts what it returns: a validated model read back validates to itself', () => {
    for (const [, input] of accepted) {
      const first = validateModel(input);
      if (!first.ok) throw new Error('expected valid');
      expect(validateModel(first.model)).toEqual(first);
    }
  });

  it('reads runtime: process back without the key, as every profile before containers', () => {
    const r = validateModel(gpu({ engine: 'vllm', gpu_class: 'l4-24g', runtime: 'process' }));
    if (!r.ok) throw new Error(formatIssues(r.issues));
    expect(r.model.profiles[0]).not.toHaveProperty('runtime');
  });

  it('reports every problem at once, not the first alone', () => {
    const r = validateModel({
      ...base,
      name: 'Bad Name',
      profiles: [{ name: 'p', engine: 'llamacpp', gpu_class: 'a100-80g', tp: 2, nodes: 2 }],
    });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.map((i) => i.path.join('.'))).toEqual(['name', 'profiles.0.nodes', 'profiles.0.tp']);
  });

  it('refuses two models of one name in a list, pointing at the second', () => {
    const m = gpu({ engine: 'llamacpp', cpu: true });
    const { issues } = validateModels([m, m]);
    expect(formatIssues(issues)).toBe(
      '[1].name: model "llama-8b" is declared twice (also item 0): give each model its own name',
    );
  });
});
