import type { CoreV1Event } from '@kubernetes/client-node';

import type { KPod, Plain } from './kube-types.js';
import type { Workload } from './manifests.js';

/**
 * Why Kubernetes does not make or start a replica's pods, in the cluster's own words: the
 * Deployment's and ReplicaSet's FailedCreate (a quota, an admission webhook), a LeaderWorkerSet's
 * StatefulSets' FailedCreate and its conditions, a pod's kubelet events (FailedMount, a failed
 * image pull). Each names the object, quotes its message and, where the words make it clear,
 * says what to do. Pure: table-tested in failures.test.ts.
 */

export type KEvent = Plain<CoreV1Event>;

export interface Trouble {
  state: 'pending' | 'failed';
  reason: string;
}

/** Events older than this are history, not why a pod is missing now (they live an hour). */
export const freshEventMs = 10 * 60_000;

/** What to do, where the Kubernetes message makes it clear; undefined where it does not. */
export function remedy(text: string): string | undefined {
  let m: RegExpExecArray | null;
  if (text.includes('exceeded quota'))
    return "raise the namespace's ResourceQuota (kubectl describe resourcequota) or lower the model's requests";
  if ((m = /persistentvolumeclaim "([^"]+)" not found/i.exec(text)))
    return `create the PersistentVolumeClaim "${m[1] ?? ''}" in the namespace, or set kubernetes.models.pvc to one that exists`;
  if (text.includes('unbound immediate PersistentVolumeClaims'))
    return 'the PVC is not bound: kubectl describe pvc says why (its StorageClass, its capacity)';
  if ((m = /\b(secret|configmap)s? "([^"]+)" not found/i.exec(text)))
    return `create the ${m[1]?.toLowerCase() === 'secret' ? 'Secret' : 'ConfigMap'} "${m[2] ?? ''}" in the namespace, or fix the name that refers to it`;
  if ((m = /admission webhook "([^"]+)" denied/.exec(text)))
    return `the cluster's admission webhook ${m[1] ?? ''} refused the pod: change what it objects to, or ask the cluster's owner`;
  if (text.includes('violates PodSecurity'))
    return "the namespace's Pod Security level refuses the pod: run the models in a namespace whose level allows it";
  if ((m = /Insufficient ((?:nvidia\.com|amd\.com)\/[\w.-]*\w)/.exec(text)))
    return `no node has a free ${m[1] ?? ''}: add GPU nodes or free some, or lower the profile's GPU count`;
  if (/Insufficient (cpu|memory)/.test(text))
    return "no node has the CPU or memory free: add nodes or lower the model's requests";
  if (/didn't match Pod's node affinity|node affinity\/selector/.test(text))
    return "no node has the labels the profile asks for (its gpu_class's product and memory): choose a class the nodes offer (llmgw ctl nodes), or label the nodes (GPU feature discovery does)";
  if (/pull/i.test(text)) {
    if (/unauthorized|authentication required|\b401\b|\b403\b|denied|forbidden/i.test(text))
      return "the registry refuses the credentials: check the image pull secret (it may be missing or hold another registry's)";
    if (/not found|manifest unknown|name unknown|no such host/i.test(text))
      return "check the image's name and tag (and that the nodes reach its registry)";
  }
  return undefined;
}

/** The words and, where clear, what to do, joined as llmgw shows them. */
export function withRemedy(text: string): string {
  const r = remedy(text);
  return r === undefined || text.includes(' — ') ? text : `${text} — ${r}`;
}

const time = (e: KEvent): number => {
  const t = e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata.creationTimestamp;
  return t === undefined ? 0 : new Date(t).getTime();
};

/** The newest Warning event matching `pick` and fresh at `now`. */
function newest(
  events: readonly KEvent[],
  pick: (e: KEvent) => boolean,
  now: number,
  fresh = freshEventMs,
): KEvent | undefined {
  let best: KEvent | undefined;
  for (const e of events) {
    if (e.type !== 'Warning' || !pick(e) || now - time(e) > fresh) continue;
    if (best === undefined || time(e) >= time(best)) best = e;
  }
  return best;
}

const quote = (kind: string, name: string, e: KEvent) =>
  withRemedy(`${kind} ${name}: ${e.reason ?? 'Warning'}: ${e.message ?? ''}`);

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

const conditionsOf = (w: Workload): Condition[] =>
  ((w.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).filter(
    (c) => typeof c.type === 'string',
  );

/**
 * Why a workload has fewer pods than it wants, or undefined when Kubernetes says nothing of it:
 * read for the replicas that have no pod yet (instead of "waiting for Kubernetes").
 */
export function workloadTrouble(w: Workload, events: readonly KEvent[], now: number): Trouble | undefined {
  const name = w.metadata?.name ?? '';
  const conditions = conditionsOf(w);
  if (w.kind === 'LeaderWorkerSet') {
    // The leaders' StatefulSet is named after the set, each group's workers' after their leader.
    const ownSet = new RegExp(`^${escape(name)}(-\\d+)?$`);
    const e = newest(
      events,
      (x) =>
        x.involvedObject.kind === 'StatefulSet' &&
        x.reason === 'FailedCreate' &&
        ownSet.test(x.involvedObject.name ?? ''),
      now,
    );
    if (e !== undefined)
      return { state: 'failed', reason: quote('StatefulSet', e.involvedObject.name ?? '', e) };
    const off = conditions.find((c) => c.status === 'False' && (c.message ?? '') !== '');
    if (off !== undefined)
      return {
        state: 'pending',
        reason: withRemedy(
          `LeaderWorkerSet ${name}: ${off.type} is False (${off.reason ?? ''}): ${off.message ?? ''}`,
        ),
      };
    return undefined;
  }
  const failure = conditions.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  if (failure !== undefined) {
    // The ReplicaSet's event names the set and counts the tries; the condition is the Deployment's copy.
    const ownSet = new RegExp(`^${escape(name)}-[a-z0-9]+$`);
    const e = newest(
      events,
      (x) =>
        x.involvedObject.kind === 'ReplicaSet' &&
        x.reason === 'FailedCreate' &&
        ownSet.test(x.involvedObject.name ?? ''),
      now,
    );
    if (e !== undefined)
      return { state: 'failed', reason: quote('ReplicaSet', e.involvedObject.name ?? '', e) };
    return {
      state: 'failed',
      reason: withRemedy(
        `Deployment ${name}: ReplicaFailure (${failure.reason ?? ''}): ${failure.message ?? ''}`,
      ),
    };
  }
  const stalled = conditions.find((c) => c.type === 'Progressing' && c.status === 'False');
  if (stalled !== undefined)
    return {
      state: 'failed',
      reason: `Deployment ${name}: ${stalled.reason ?? 'Progressing is False'}: ${stalled.message ?? ''} — kubectl describe deployment ${name} and its pods' events say why`,
    };
  return undefined;
}

/** Kubelet and volume events that keep a scheduled pod from starting; "Failed" only for a pull. */
const kubeletReasons = new Set(['FailedMount', 'FailedAttachVolume', 'FailedCreatePodSandBox']);

/**
 * A pod's state with its events: a volume that does not mount fails the replica (with the
 * kubelet's words), a failed pull quotes the registry's answer, and every reason gets what to do
 * where that is clear. `base` is the pod's own state (podState).
 */
export function podTrouble(
  pod: KPod,
  base: { state: string; reason?: string },
  events: readonly KEvent[],
  now: number,
): Trouble | { reason: string } | undefined {
  if (base.state === 'ready' || pod.metadata?.deletionTimestamp !== undefined) return undefined;
  const uid = pod.metadata?.uid;
  const name = pod.metadata?.name ?? '';
  const mine = (e: KEvent) =>
    e.involvedObject.kind === 'Pod' &&
    (uid !== undefined && e.involvedObject.uid !== undefined
      ? e.involvedObject.uid === uid
      : e.involvedObject.name === name);
  if (pod.status?.phase === 'Pending' && pod.spec?.nodeName !== undefined) {
    const e = newest(events, (x) => mine(x) && kubeletReasons.has(x.reason ?? ''), now);
    if (e !== undefined) return { state: 'failed', reason: quote('pod', name, e) };
  }
  const pulling = /ErrImagePull|ImagePullBackOff/.test(base.reason ?? '');
  if (pulling) {
    const e = newest(
      events,
      (x) => mine(x) && x.reason === 'Failed' && (x.message ?? '').startsWith('Failed to pull image'),
      now,
    );
    if (e !== undefined)
      return { reason: withRemedy(`${base.reason ?? ''}; the kubelet: ${e.message ?? ''}`) };
  }
  if (base.reason === undefined) return undefined;
  const reason = withRemedy(base.reason);
  return reason === base.reason ? undefined : { reason };
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
