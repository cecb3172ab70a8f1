import { describe, expect, it } from 'vitest';

import { planText } from './plan.js';

describe('llmgw ctl plan, as text', () => {
  it('says why nothing runs original weights on CPUs, and what to ask instead', () => {
    expect(planText({ model: 'qwen', context: 32768, options: [] })).toBe(
      'qwen at 32768 tokens: per card, GiB\n' +
        'No engine runs these weights on the classes asked about: original weights (safetensors) run on ' +
        'vLLM, SGLang and TensorRT-LLM, on GPUs only. Name GPU classes (--class l4-24g,a100-80g), or plan ' +
        'a GGUF file, which llama.cpp also runs on CPUs.',
    );
  });
});
