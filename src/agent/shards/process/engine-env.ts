/**
 * The environment every engine process starts from. An engine inherits nothing of the
 * agent's by default: the agent (and `llmgw up`, which runs the control plane in the same
 * process) holds the admin key, the database URL and its own settings in its environment,
 * and an engine's environment is readable by its user (/proc/PID/environ) and by any code
 * it loads. What an engine does get: the basics a program needs, and what the machine's
 * libraries, devices and network ask of any program that uses them. On top come the
 * engine's own variables (its key, CUDA_VISIBLE_DEVICES, caches: ProcessSpec.env) and the
 * profile's env, which is where anything else an engine needs is set.
 */

/** Kept by name. */
const names = new Set([
  // A program's basics.
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  // Shared libraries: the CUDA runtime, and the directory of an installed llama.cpp build.
  'LD_LIBRARY_PATH',
  // The network: a hub mirror, proxies, CA bundles. No hub token (HF_TOKEN): the agent
  // fetches an engine's files before it starts, and the engine reads them offline.
  'HF_ENDPOINT',
  'HF_HUB_OFFLINE',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  // Which network interface multi-node ranks talk over.
  'GLOO_SOCKET_IFNAME',
]);

/** Kept by prefix: the locale, and the machine's CUDA, NVIDIA container runtime and NCCL settings. */
const prefixes = ['LC_', 'CUDA_', 'NVIDIA_', 'NCCL_'];

/** llmgw's own settings and secrets: never an engine's, whatever the lists above say. */
const own = /^LLMGW_/i;

/** What an engine keeps of the agent's environment `from`. */
export function engineEnv(from: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(from)) {
    if (value === undefined || own.test(name)) continue;
    if (names.has(name) || prefixes.some((p) => name.startsWith(p))) out[name] = value;
  }
  return out;
}
