import { LlmgwError } from '../../core/errors.js';

/** Which llama.cpp build a node runs: its GPU backend, or none. */
export type LlamaFlavour = 'cpu' | 'vulkan' | 'cuda';

export const llamaFlavours: readonly LlamaFlavour[] = ['cpu', 'vulkan', 'cuda'];

/** The settings an operator changes when an install goes wrong, named once for every message. */
export const setting = {
  bin: 'agent.engines.llamacpp.bin',
  build: 'agent.engines.llamacpp.build',
  releaseUrl: 'agent.engines.llamacpp.release_url',
  cudaArchive: 'agent.engines.llamacpp.cuda_archive',
} as const;

/** A release tag, `b10587`. Checked before it names a directory or a URL. */
export function checkBuild(build: string): void {
  if (!/^b\d{1,7}$/.test(build)) {
    throw new LlmgwError(
      'invalid_argument',
      `"${build}" is not a llama.cpp release tag: set ${setting.build} to one such as b10587 (the tags at https://github.com/ggml-org/llama.cpp/releases)`,
    );
  }
}

/**
 * The Linux release asset of a build (shared/reference/gpus-and-engines.md, D):
 * `llama-b10587-bin-ubuntu-x64.tar.gz`, `-ubuntu-arm64`, `-ubuntu-vulkan-x64`. llama.cpp
 * publishes no Linux CUDA binary, so a CUDA build is the operator's own archive.
 */
export function assetName(build: string, flavour: LlamaFlavour, arch: string): string {
  return `${assetStem(build, flavour, arch)}.tar.gz`;
}

/** The same asset as builds before the switch to .tar.gz published it. */
export function zipAssetName(build: string, flavour: LlamaFlavour, arch: string): string {
  return `${assetStem(build, flavour, arch)}.zip`;
}

function assetStem(build: string, flavour: LlamaFlavour, arch: string): string {
  checkBuild(build);
  if (arch !== 'x64' && arch !== 'arm64') {
    throw new LlmgwError(
      'invalid_argument',
      `llama.cpp publishes Linux builds for x64 and arm64 only, and this node is ${arch}: set ${setting.bin} to a llama-server built for it`,
    );
  }
  switch (flavour) {
    case 'cpu':
      return `llama-${build}-bin-ubuntu-${arch}`;
    case 'vulkan':
      if (arch !== 'x64') {
        throw new LlmgwError(
          'invalid_argument',
          `llama.cpp publishes its Vulkan build for x64 only, and this node is ${arch}: set ${setting.cudaArchive} to a CUDA build for its GPUs, use the CPU build, or set ${setting.bin}`,
        );
      }
      return `llama-${build}-bin-ubuntu-vulkan-${arch}`;
    case 'cuda':
      throw new LlmgwError(
        'invalid_argument',
        `llama.cpp publishes no Linux CUDA build to download: set ${setting.cudaArchive} to the URL of a CUDA build archive (.tar.gz holding llama-server), or set ${setting.bin}`,
      );
  }
}

/**
 * The build a node should install. CUDA wherever the operator configured an archive and
 * the node has NVIDIA GPUs, because it is the only backend that opens MIG instances and
 * the fastest on NVIDIA; otherwise the published Vulkan build, which drives whole NVIDIA
 * cards through the driver's Vulkan ICD. `arch` matters because Vulkan is x64 only.
 */
export function chooseFlavour(
  hasNvidiaGpus: boolean,
  hasMigDevices: boolean,
  cudaArchive: string | undefined,
  arch = 'x64',
): { flavour: LlamaFlavour; warning?: string } {
  // A MIG instance is an NVIDIA device even if the caller counted whole cards only.
  if (!hasNvidiaGpus && !hasMigDevices) return { flavour: 'cpu' };
  if (cudaArchive !== undefined && cudaArchive.trim() !== '') return { flavour: 'cuda' };
  if (arch !== 'x64') {
    return {
      flavour: 'cpu',
      warning: `llama.cpp publishes no Vulkan build for ${arch}, so llama.cpp replicas here run on the CPU: set ${setting.cudaArchive} to a CUDA build archive to use this node's GPUs`,
    };
  }
  if (hasMigDevices) {
    return {
      flavour: 'vulkan',
      warning: `this node has MIG instances, which Vulkan cannot open: llama.cpp replicas on MIG need a CUDA build, so set ${setting.cudaArchive} to the URL of a CUDA build archive (.tar.gz holding llama-server); until then the Vulkan build serves whole cards only`,
    };
  }
  return { flavour: 'vulkan' };
}
