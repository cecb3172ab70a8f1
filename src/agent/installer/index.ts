/** Installs llama.cpp on a node: the release build for its devices, checked before use. */
export { assetName, chooseFlavour, type LlamaFlavour } from './llama-asset.js';
export {
  findInstalledLlama,
  installLlamaCpp,
  type InstalledLlama,
  type LlamaInstallOptions,
  type LlamaInstallProgress,
} from './install-llama-cpp.js';
export { llamaEnv } from './llama-check.js';
export { installedBuild } from './marker.js';
