/**
 * The fake hub every control plane in the tests resolves model sources against (tests never
 * reach the internet), with the repositories the tests name: real config.json values, a real
 * GGUF header, and large weight files given by size and digest only.
 */
import { createHash } from 'node:crypto';

import { type FakeHub, type FakeRepo, startFakeHub } from '../fakes/hub/hub.js';
import { configs, llama31_8b, qwen25_7b, tinyTensors } from '../fakes/gguf/models.js';
import { writeGguf } from '../fakes/gguf/writer.js';

/** A made-up but well-formed sha256 for a file given by size only. */
export const digest = (name: string) => createHash('sha256').update(name).digest('hex');

const json = (v: unknown) => Buffer.from(JSON.stringify(v, null, 2));
const big = (name: string, size: number) => ({ size, sha256: digest(name) });

/** A safetensors repository: config.json, tokenizer, and weights sharded as the index says. */
function sharded(config: unknown, shards: number[], extra: Record<string, Buffer> = {}): FakeRepo['files'] {
  const names = shards.map(
    (_, i) =>
      `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`,
  );
  const files: FakeRepo['files'] = {
    'config.json': json(config),
    'generation_config.json': json({ do_sample: true }),
    'tokenizer.json': json({ version: '1.0' }),
    'tokenizer_config.json': json({}),
    'README.md': Buffer.from('# model\n'),
    'model.safetensors.index.json': json({
      metadata: { total_size: shards.reduce((a, b) => a + b, 0) - 4096 * shards.length },
      weight_map: Object.fromEntries(names.map((n, i) => [`model.layers.${i}.weight`, n])),
    }),
    ...extra,
  };
  shards.forEach((size, i) => {
    const name = names[i] ?? '';
    files[name] = big(name, size);
  });
  return files;
}

/** The GGUF of Llama 3.1 8B written with its real header (and a few tiny tensors). */
export const llamaGguf = writeGguf({ metadata: llama31_8b, tensors: tinyTensors(3 * 1024 * 1024) });

export const llamaGgufRepo = 'bartowski/Meta-Llama-3.1-8B-Instruct-GGUF';
export const llamaGgufFile = 'Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf';

/** Qwen2.5-0.5B-Instruct's header: Qwen2.5 7B's keys with the 0.5B's sizes (its config.json). */
const qwen25_05b = qwen25_7b.map(([k, v]): (typeof qwen25_7b)[number] => {
  const sizes: Record<string, number> = {
    'qwen2.block_count': 24,
    'qwen2.embedding_length': 896,
    'qwen2.feed_forward_length': 4864,
    'qwen2.attention.head_count': 14,
    'qwen2.attention.head_count_kv': 2,
  };
  const size = sizes[k];
  return size === undefined ? [k, v] : [k, { t: 'u32', v: size }];
});

const small = (metadata: typeof qwen25_7b) => writeGguf({ metadata, tensors: tinyTensors(256 * 1024) });

/** Qwen2.5-72B-Instruct's config.json (the keys that size it). */
const qwen72Config = {
  architectures: ['Qwen2ForCausalLM'],
  model_type: 'qwen2',
  hidden_size: 8192,
  intermediate_size: 29568,
  max_position_embeddings: 32768,
  max_window_layers: 70,
  num_attention_heads: 64,
  num_hidden_layers: 80,
  num_key_value_heads: 8,
  rope_theta: 1000000.0,
  sliding_window: 131072,
  use_sliding_window: false,
  torch_dtype: 'bfloat16',
  vocab_size: 152064,
};

/** The repositories the tests name, by id. */
export function testRepos(): Record<string, FakeRepo> {
  return {
    'Qwen/Qwen2.5-7B-Instruct': {
      commit: 'a09a35458c702b33eeacc393d103063234e8bc28',
      files: sharded(configs.qwen25_7b.json, [3_945_441_440, 3_864_726_352, 3_864_726_424, 3_556_377_672]),
    },
    'Qwen/Qwen2.5-72B-Instruct': {
      files: sharded(qwen72Config, [72_000_000_000, 73_400_000_000]),
    },
    'org/repo': {
      files: {
        'config.json': json(configs.llama31_8b.json),
        // Small enough for agents to fetch in the tests that serve it (vLLM's fake engine).
        'model.safetensors': Buffer.alloc(64 * 1024, 7),
      },
    },
    'meta-llama/Llama-3.1-8B-Instruct': {
      gated: true,
      files: sharded(configs.llama31_8b.json, [4_976_698_672, 5_000_000_000, 4_915_916_176, 1_168_138_808]),
    },
    // The sources of the models under examples/.
    'Qwen/Qwen2.5-0.5B-Instruct-GGUF': {
      files: {
        'qwen2.5-0.5b-instruct-q4_k_m.gguf': small(qwen25_05b),
        'qwen2.5-0.5b-instruct-q8_0.gguf': big('qwen-0.5b-q8', 675_710_816),
      },
    },
    'bartowski/Qwen2.5-7B-Instruct-GGUF': {
      files: { 'Qwen2.5-7B-Instruct-Q4_K_M.gguf': small(qwen25_7b) },
    },
    [llamaGgufRepo]: {
      commit: '0123456789abcdef0123456789abcdef01234567',
      files: {
        [llamaGgufFile]: llamaGguf,
        'Meta-Llama-3.1-8B-Instruct-Q8_0.gguf': big('q8', 8_540_770_784),
        'Meta-Llama-3.1-8B-Instruct-Q2_K.gguf': big('q2', 3_179_131_872),
        'README.md': Buffer.from('# GGUF\n'),
      },
    },
  };
}

/** A fake hub with `testRepos()` (or the repositories given), its LFS files on another origin. */
export function startTestHub(repos: Record<string, FakeRepo> = testRepos()): Promise<FakeHub> {
  return startFakeHub({ repos, separateFileServer: true });
}
