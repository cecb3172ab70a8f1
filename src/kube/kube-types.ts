import type {
  V1Container,
  V1ContainerStatus,
  V1Deployment,
  V1EnvVar,
  V1Node,
  V1Pod,
  V1PodSpec,
  V1PodTemplateSpec,
  V1Secret,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';

/**
 * The API's objects as plain data: the client library declares them as classes, but llmgw
 * writes them as object literals and reads them as the informers give them (JSON).
 */
export type Plain<T> = T extends Date
  ? Date
  : T extends (infer U)[]
    ? Plain<U>[]
    : T extends object
      ? { [K in keyof T]: Plain<T[K]> }
      : T;

export type KNode = Plain<V1Node>;
export type KPod = Plain<V1Pod>;
export type KDeployment = Plain<V1Deployment>;
export type KSecret = Plain<V1Secret>;
export type KContainer = Plain<V1Container>;
export type KContainerStatus = Plain<V1ContainerStatus>;
export type KEnvVar = Plain<V1EnvVar>;
export type KPodSpec = Plain<V1PodSpec>;
export type KPodTemplate = Plain<V1PodTemplateSpec>;
export type KVolume = Plain<V1Volume>;
export type KVolumeMount = Plain<V1VolumeMount>;
