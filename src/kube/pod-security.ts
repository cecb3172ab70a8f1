import type { V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';

import type { EngineName } from '../catalog/model-spec.js';

import type { Plain } from './kube-types.js';

/**
 * The securityContexts of llmgw's pods. Every pod meets the `baseline` Pod Security Standard
 * (nothing privileged or from the host) and is hardened as far as its image lets it: no
 * privilege escalation, every capability dropped, the runtime's seccomp profile. The
 * `restricted` standard also wants a non-root user, which only some engines' images take.
 */

export type KPodSecurityContext = Plain<V1PodSecurityContext>;
export type KSecurityContext = Plain<V1SecurityContext>;

/** The user llmgw's own image runs as (Dockerfile: USER 65532:65532). */
export const nonRootUser = 65532;

/**
 * Engines whose official image runs as any user: llama.cpp's llama-server is one binary that
 * reads its model and writes nothing. vLLM's, SGLang's and TensorRT-LLM's images run as root
 * and write caches under /root (torch.compile, Triton and FlashInfer kernels), so their pods
 * meet `baseline` only.
 */
const runsAsAnyUser: ReadonlySet<EngineName> = new Set(['llamacpp']);

export type PodSecurityLevel = 'restricted' | 'baseline';

/** The level an engine's pods meet. */
export function podSecurityLevel(engine: EngineName): PodSecurityLevel {
  return runsAsAnyUser.has(engine) ? 'restricted' : 'baseline';
}

const nonRoot = { runAsNonRoot: true, runAsUser: nonRootUser, runAsGroup: nonRootUser };

/** The pod's own: the runtime's seccomp profile, and a non-root user where the engine takes one. */
export function podSecurityContext(engine: EngineName): KPodSecurityContext {
  return {
    seccompProfile: { type: 'RuntimeDefault' },
    ...(podSecurityLevel(engine) === 'restricted' ? nonRoot : {}),
  };
}

/** Every container's: no privilege escalation, no capability. */
export function containerSecurityContext(): KSecurityContext {
  return { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
}

/** The download init container runs llmgw's own image, as its non-root user, whatever the engine. */
export function downloaderSecurityContext(): KSecurityContext {
  return { ...containerSecurityContext(), ...nonRoot };
}
