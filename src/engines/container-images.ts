import { parseImage } from '../catalog/image-ref.js';
import type { EngineName } from '../catalog/model-spec.js';

/**
 * The engines' official images, for profiles with `runtime: container`: which image and
 * tag runs when neither the profile (`image:`) nor the node's settings
 * (`agent.containers.images`) name one, the executable inside each (the agent's command
 * line replaces the image's entrypoint), and the registry mirror an offline site puts in
 * front of them. Pure: table-tested in container-images.test.ts.
 */

/**
 * Default repositories and tags, pinned so that every node of a cluster runs the same
 * engine (`latest` would differ by when each node pulled). Where each tag was read:
 * - llama.cpp: ggml-org's own images, tagged `server-cuda-<build>` / `server-<build>` for
 *   every release; the build is the one the process path installs (`agent.engines.llamacpp.build`).
 * - vLLM v0.21.0: Docker Hub vllm/vllm-openai, the release InferenceX moved its H200/B200
 *   configurations to in May 2026 (SemiAnalysisAI/InferenceX perf-changelog.yaml).
 * - SGLang v0.5.19-cu129: SGLang's installation guide (docs/get-started/install.mdx) names it
 *   the last CUDA 12 image; the CUDA 13 ones after it need a 580+ driver, which many nodes lack.
 * - TensorRT-LLM 1.3.0rc5: the tag of NVIDIA's quick start guide
 *   (nvidia.github.io/TensorRT-LLM/quick-start-guide.html); TensorRT-LLM's images are all release candidates lately.
 */
export const engineImages = {
  llamacpp: { repository: 'ghcr.io/ggml-org/llama.cpp' },
  vllm: { repository: 'vllm/vllm-openai', tag: 'v0.21.0' },
  sglang: { repository: 'lmsysorg/sglang', tag: 'v0.5.19-cu129' },
  trtllm: { repository: 'nvcr.io/nvidia/tensorrt-llm/release', tag: '1.3.0rc5' },
} as const;

/**
 * The engine's executable inside its image: what the engine module's command runs (its
 * `bin`). llama.cpp's images keep llama-server at /app, off PATH; SGLang runs as
 * `python3 -m sglang.launch_server` as on the host.
 */
export const imageExecutables: Record<EngineName, string> = {
  llamacpp: '/app/llama-server',
  vllm: 'vllm',
  sglang: 'python3',
  trtllm: 'trtllm-serve',
};

/** The engine's default image: llama.cpp's CUDA build for a GPU profile, its CPU build otherwise. */
export function defaultImage(engine: EngineName, o: { gpu: boolean; llamaBuild: string }): string {
  if (engine === 'llamacpp')
    return `${engineImages.llamacpp.repository}:server-${o.gpu ? 'cuda-' : ''}${o.llamaBuild}`;
  const { repository, tag } = engineImages[engine];
  return `${repository}:${tag}`;
}

/**
 * The image a container profile runs: the profile's own, else the node's setting for the
 * engine, else the default image, moved to the mirror `registry` when one is set (images
 * named by hand are taken as written: their author chose the registry).
 */
export function chooseImage(o: {
  engine: EngineName;
  profileImage?: string | undefined;
  settingsImage?: string | undefined;
  gpu: boolean;
  llamaBuild: string;
  registry?: string | undefined;
}): string {
  if (o.profileImage !== undefined) return o.profileImage;
  if (o.settingsImage !== undefined && o.settingsImage !== '') return o.settingsImage;
  const image = defaultImage(o.engine, o);
  return o.registry === undefined || o.registry === '' ? image : onRegistry(image, o.registry);
}

/**
 * The same image on the mirror `registry`: its registry replaced, or put in front of a
 * Docker Hub image (whose official images are under library/, as mirrors keep them).
 */
export function onRegistry(image: string, registry: string): string {
  const ref = parseImage(image);
  if ('problem' in ref) throw new Error(ref.problem);
  const hub = ref.registry === undefined || ref.registry === 'docker.io';
  const path = hub && !ref.path.includes('/') ? `library/${ref.path}` : ref.path;
  return `${registry.replace(/\/+$/, '')}/${path}${ref.tag === undefined ? '' : `:${ref.tag}`}${ref.digest === undefined ? '' : `@${ref.digest}`}`;
}
