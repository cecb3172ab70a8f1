import { LlmgwError } from '../core/errors.js';

import type { Weights } from './types.js';

/**
 * The model argument of the engines that load a directory or a Hugging Face repository
 * (vLLM, SGLang, TensorRT-LLM): a local path, or `org/repo`, which they download
 * themselves. A single file of a repository, or a plain URL, is llama.cpp's way only.
 */
export function repositoryOrPath(engine: string, weights: Weights): string {
  if ('path' in weights) return weights.path;
  if ('hf' in weights) {
    if (weights.file !== undefined) {
      throw new LlmgwError(
        'invalid_argument',
        `${engine} loads a whole repository, not one file of it: write source: hf://${weights.hf} (without /${weights.file}), or use engine: llamacpp for a GGUF file`,
      );
    }
    return weights.hf;
  }
  throw new LlmgwError(
    'invalid_argument',
    `${engine} cannot download weights from a URL (${weights.url}): write source: hf://ORG/REPO, or a path on the nodes`,
  );
}
