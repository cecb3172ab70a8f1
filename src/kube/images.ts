import type { EngineName } from '../catalog/model-spec.js';

/**
 * The engines' official images and the executable inside each, for pods. The same values as
 * the container launcher's table (src/engines/container-images.ts, on helper cwire's branch):
 * once both are merged this file should import that one instead of keeping its own copy.
 */
export const podImages: Record<EngineName, { image: string; gpuImage?: string; bin: string }> = {
  llamacpp: {
    image: 'ghcr.io/ggml-org/llama.cpp:server-b10587',
    gpuImage: 'ghcr.io/ggml-org/llama.cpp:server-cuda-b10587',
    bin: '/app/llama-server',
  },
  vllm: { image: 'vllm/vllm-openai:v0.21.0', bin: 'vllm' },
  sglang: { image: 'lmsysorg/sglang:v0.5.19-cu129', bin: 'python3' },
  trtllm: { image: 'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5', bin: 'trtllm-serve' },
};

/** The image a profile's pods run: its own `image:` when it names one, else the engine's default. */
export function podImage(engine: EngineName, gpu: boolean, profileImage?: string): string {
  if (profileImage !== undefined && profileImage !== '') return profileImage;
  const d = podImages[engine];
  return gpu ? (d.gpuImage ?? d.image) : d.image;
}
