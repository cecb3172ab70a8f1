import type { KContainerStatus, KPod } from './kube-types.js';

import type { EngineName } from '../catalog/model-spec.js';
import type { ReplicaState, ReplicaView, ShardView } from '../protocol/replica-views.js';

import { podTrouble, type KEvent } from './failures.js';
import { engineContainer, modelNameAnnotation } from './manifests.js';
import { modelLabel, profileLabel } from './names.js';
import { gpuResource, migResourcePrefix } from './node-classes.js';

/**
 * llmgw's pods as replicas: a pod of a Deployment is a replica; a LeaderWorkerSet's group is
 * one, its leader's pod named for it and every pod of the group a shard. The state is read
 * as a person reading `kubectl describe pod` would: the scheduler's words for a pending pod,
 * the kubelet's for an image or a crash loop. Pure: table-tested in pod-views.test.ts.
 */

export const lwsNameLabel = 'leaderworkerset.sigs.k8s.io/name';
export const lwsGroupLabel = 'leaderworkerset.sigs.k8s.io/group-index';
export const lwsWorkerLabel = 'leaderworkerset.sigs.k8s.io/worker-index';

/** Waiting reasons that will not pass by themselves: the replica is failed until someone acts. */
const stuck = new Set([
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

export interface PodState {
  state: ReplicaState;
  reason?: string;
}

/** A pod's state as a replica's. */
export function podState(pod: KPod): PodState {
  const status = pod.status ?? {};
  const conditions = status.conditions ?? [];
  if (status.phase === 'Failed' || status.phase === 'Succeeded') {
    return {
      state: 'failed',
      reason: status.message ?? terminatedText(mainStatus(pod)) ?? `the pod ${status.phase.toLowerCase()}`,
    };
  }
  const scheduled = conditions.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' || (pod.spec?.nodeName === undefined && status.phase === 'Pending')) {
    return { state: 'pending', reason: scheduled?.message ?? scheduled?.reason ?? 'waiting to be scheduled' };
  }
  for (const s of status.initContainerStatuses ?? []) {
    const waiting = s.state?.waiting;
    if (waiting?.reason !== undefined && stuck.has(waiting.reason))
      return { state: 'failed', reason: waitingText(s.name, waiting.reason, waiting.message) };
    if (s.state?.running !== undefined)
      return { state: 'downloading', reason: `init container ${s.name} is fetching the model's files` };
  }
  const main = mainStatus(pod);
  const waiting = main?.state?.waiting;
  if (waiting?.reason !== undefined && stuck.has(waiting.reason)) {
    const last = terminatedText(main, true);
    return {
      state: 'failed',
      reason:
        waitingText(main?.name ?? engineContainer, waiting.reason, waiting.message) +
        (last === undefined ? '' : `; last exit: ${last}`),
    };
  }
  const ready = conditions.find((c) => c.type === 'Ready');
  if (status.phase === 'Running' && ready?.status === 'True') return { state: 'ready' };
  if (waiting?.reason !== undefined)
    return {
      state: 'starting',
      reason: waitingText(main?.name ?? engineContainer, waiting.reason, waiting.message),
    };
  return {
    state: 'starting',
    ...(status.phase === 'Running' ? { reason: 'the engine is loading (not ready yet)' } : {}),
  };
}

function mainStatus(pod: KPod): KContainerStatus | undefined {
  const all = pod.status?.containerStatuses ?? [];
  return all.find((s) => s.name === engineContainer) ?? all[0];
}

function waitingText(container: string, reason: string, message: string | undefined): string {
  return `${container}: ${reason}${message === undefined || message === '' ? '' : `: ${message}`}`;
}

function terminatedText(s: KContainerStatus | undefined, last = false): string | undefined {
  const t = last ? s?.lastState?.terminated : s?.state?.terminated;
  if (t === undefined) return undefined;
  return `exit code ${t.exitCode}${t.reason === undefined ? '' : ` (${t.reason})`}${t.message === undefined ? '' : `: ${t.message}`}`;
}

/** The GPU resources the engine container requests, as people read them: `nvidia.com/gpu ×2`. */
function devicesOf(pod: KPod): string[] {
  const c = pod.spec?.containers.find((x) => x.name === engineContainer) ?? pod.spec?.containers[0];
  const out: string[] = [];
  for (const [resource, value] of Object.entries(c?.resources?.requests ?? {})) {
    if (resource !== gpuResource && !resource.startsWith(migResourcePrefix)) continue;
    out.push(`${resource} ×${value}`);
  }
  return out;
}

function restartsOf(pod: KPod): number {
  return (pod.status?.containerStatuses ?? []).reduce((n, s) => n + s.restartCount, 0);
}

export interface PodGroupInput {
  /** The leader's pod (a Deployment's pod alone). */
  leader: KPod;
  workers: readonly KPod[];
  engine: EngineName | null;
  port: number;
  /** The namespace's recent Warning events: a pod's say why it does not start (failures.ts). */
  events?: readonly KEvent[];
  /** The time events are fresh against (ms). */
  now?: number;
}

/** A pod's state, with what its events add (a volume that does not mount, the registry's answer). */
function stateWithEvents(pod: KPod, g: PodGroupInput): PodState {
  const base = podState(pod);
  if (g.events === undefined) return base;
  const t = podTrouble(pod, base, g.events, g.now ?? Date.now());
  return t === undefined ? base : { ...base, ...t };
}

/** One replica's view from its pods. */
export function replicaView(g: PodGroupInput): ReplicaView {
  const { leader } = g;
  const meta = leader.metadata ?? {};
  const model = meta.annotations?.[modelNameAnnotation] ?? meta.labels?.[modelLabel] ?? '';
  const pods = [leader, ...g.workers];
  const states = pods.map((p) => stateWithEvents(p, g));
  // The group is as far as its furthest-behind pod: failed, then pending, then starting.
  const order: ReplicaState[] = [
    'failed',
    'pending',
    'downloading',
    'starting',
    'unknown',
    'degraded',
    'ready',
  ];
  const worst = states.reduce((a, b) => (order.indexOf(b.state) < order.indexOf(a.state) ? b : a));
  const shards: ShardView[] = pods.map((p, rank) => {
    const s = states[rank] ?? { state: 'unknown' as const };
    const readySince = p.status?.conditions?.find(
      (c) => c.type === 'Ready' && c.status === 'True',
    )?.lastTransitionTime;
    return {
      rank,
      node: p.spec?.nodeName ?? '',
      devices: devicesOf(p),
      port: g.port,
      state: p.metadata?.deletionTimestamp === undefined ? s.state : 'stopping',
      ...(s.reason === undefined ? {} : { reason: s.reason }),
      restarts: restartsOf(p),
      ...(readySince === undefined ? {} : { ready_since: new Date(readySince).toISOString() }),
    };
  });
  const podIP = leader.status?.podIP;
  const created = meta.creationTimestamp;
  return {
    id: meta.name ?? '',
    model,
    profile: meta.labels?.[profileLabel] ?? null,
    engine: g.engine,
    state: worst.state,
    ...(worst.reason === undefined ? {} : { reason: worst.reason }),
    ...(leader.spec?.nodeName === undefined ? {} : { node: leader.spec.nodeName }),
    ...(shards[0]?.ready_since === undefined || worst.state !== 'ready'
      ? {}
      : { ready_since: shards[0].ready_since }),
    restarts: shards.reduce((n, s) => n + s.restarts, 0),
    ...(podIP === undefined || podIP === '' ? {} : { endpoint: `http://${podIP}:${g.port}` }),
    ...(meta.deletionTimestamp === undefined ? {} : { retiring: true }),
    ...(created === undefined ? {} : { created_at: new Date(created).toISOString() }),
    shards,
  };
}

/** Pods grouped into replicas: a LeaderWorkerSet's pods by group under their leader, any other pod alone. */
export function groupPods(pods: readonly KPod[]): { leader: KPod; workers: KPod[] }[] {
  const groups = new Map<string, { leader?: KPod; workers: KPod[] }>();
  const out: { leader: KPod; workers: KPod[] }[] = [];
  for (const pod of pods) {
    const labels = pod.metadata?.labels ?? {};
    const set = labels[lwsNameLabel];
    if (set === undefined) {
      out.push({ leader: pod, workers: [] });
      continue;
    }
    const key = `${set}/${labels[lwsGroupLabel] ?? ''}`;
    const g = groups.get(key) ?? { workers: [] };
    if ((labels[lwsWorkerLabel] ?? '0') === '0') g.leader = pod;
    else g.workers.push(pod);
    groups.set(key, g);
  }
  for (const g of groups.values()) {
    if (g.leader === undefined) continue;
    const rank = (p: KPod) => Number(p.metadata?.labels?.[lwsWorkerLabel] ?? 0);
    out.push({ leader: g.leader, workers: g.workers.sort((a, b) => rank(a) - rank(b)) });
  }
  return out.sort((a, b) => (a.leader.metadata?.name ?? '').localeCompare(b.leader.metadata?.name ?? ''));
}
