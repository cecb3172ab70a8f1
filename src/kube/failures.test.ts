import { describe, expect, it } from 'vitest';

import { podTrouble, remedy, workloadTrouble, type KEvent } from './failures.js';
import type { KPod } from './kube-types.js';
import type { Workload } from './manifests.js';

const now = Date.parse('2026-12-05T01:00:00Z');
const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000);
const event = (
  kind: string,
  name: string,
  reason: string,
  message: string,
  o: { minutesAgo?: number; uid?: string; type?: string } = {},
): KEvent => ({
  metadata: { name: `${name}.1`, uid: `${name}-${reason}-${String(o.minutesAgo ?? 0)}` },
  involvedObject: { kind, name, ...(o.uid === undefined ? {} : { uid: o.uid }) },
  reason,
  message,
  type: o.type ?? 'Warning',
  lastTimestamp: at(o.minutesAgo ?? 0),
});
const deployment = (conditions: object[]): Workload => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'llmgw-qwen-h100' },
  status: { conditions: conditions as never },
});
const lws = (conditions: object[]): Workload =>
  ({
    apiVersion: 'leaderworkerset.x-k8s.io/v1',
    kind: 'LeaderWorkerSet',
    metadata: { name: 'llmgw-big-two' },
    spec: {
      replicas: 1,
      leaderWorkerTemplate: { size: 2, leaderTemplate: {}, workerTemplate: {} },
    },
    status: { conditions },
  }) as Workload;
const quota =
  'pods "llmgw-qwen-h100-7c5d-abcde" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2';
const failure = { type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: quota };
const quotaHint =
  " — raise the namespace's ResourceQuota (kubectl describe resourcequota) or lower the model's requests";

describe('workloadTrouble', () => {
  it.each([
    [
      "a ReplicaSet's FailedCreate, while the Deployment has ReplicaFailure",
      deployment([failure]),
      [event('ReplicaSet', 'llmgw-qwen-h100-7c5d', 'FailedCreate', `Error creating: ${quota}`)],
      {
        state: 'failed',
        reason: `ReplicaSet llmgw-qwen-h100-7c5d: FailedCreate: Error creating: ${quota}${quotaHint}`,
      },
    ],
    [
      "the Deployment's ReplicaFailure when its set's events are gone",
      deployment([failure]),
      [],
      {
        state: 'failed',
        reason: `Deployment llmgw-qwen-h100: ReplicaFailure (FailedCreate): ${quota}${quotaHint}`,
      },
    ],
    [
      "not another Deployment's set (a longer name), nor a Normal event",
      deployment([failure]),
      [
        event('ReplicaSet', 'llmgw-qwen-h100-x-7c5d', 'FailedCreate', 'Error creating: other'),
        event('ReplicaSet', 'llmgw-qwen-h100-7c5d', 'SuccessfulCreate', 'Created pod', { type: 'Normal' }),
      ],
      {
        state: 'failed',
        reason: `Deployment llmgw-qwen-h100: ReplicaFailure (FailedCreate): ${quota}${quotaHint}`,
      },
    ],
    [
      'nothing from old FailedCreate events once the condition is gone',
      deployment([{ type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable' }]),
      [event('ReplicaSet', 'llmgw-qwen-h100-7c5d', 'FailedCreate', `Error creating: ${quota}`)],
      undefined,
    ],
    [
      'a rollout past its deadline',
      deployment([
        {
          type: 'Progressing',
          status: 'False',
          reason: 'ProgressDeadlineExceeded',
          message: 'ReplicaSet "llmgw-qwen-h100-7c5d" has timed out progressing.',
        },
      ]),
      [],
      {
        state: 'failed',
        reason:
          'Deployment llmgw-qwen-h100: ProgressDeadlineExceeded: ReplicaSet "llmgw-qwen-h100-7c5d" has timed out progressing. — kubectl describe deployment llmgw-qwen-h100 and its pods\' events say why',
      },
    ],
    [
      "a LeaderWorkerSet's worker StatefulSet's FailedCreate (an admission webhook)",
      lws([]),
      [
        event(
          'StatefulSet',
          'llmgw-big-two-0',
          'FailedCreate',
          'create Pod llmgw-big-two-0-1 in StatefulSet llmgw-big-two-0 failed error: admission webhook "gpu-policy.example.com" denied the request: no',
        ),
      ],
      {
        state: 'failed',
        reason:
          'StatefulSet llmgw-big-two-0: FailedCreate: create Pod llmgw-big-two-0-1 in StatefulSet llmgw-big-two-0 failed error: admission webhook "gpu-policy.example.com" denied the request: no — the cluster\'s admission webhook gpu-policy.example.com refused the pod: change what it objects to, or ask the cluster\'s owner',
      },
    ],
    [
      'not an event of an hour ago',
      lws([]),
      [event('StatefulSet', 'llmgw-big-two', 'FailedCreate', 'old', { minutesAgo: 30 })],
      undefined,
    ],
    [
      "a LeaderWorkerSet's condition that is False, with its words",
      lws([
        {
          type: 'Available',
          status: 'False',
          reason: 'AllGroupsReady',
          message: 'Not all replicas are ready',
        },
      ]),
      [],
      {
        state: 'pending',
        reason:
          'LeaderWorkerSet llmgw-big-two: Available is False (AllGroupsReady): Not all replicas are ready',
      },
    ],
  ])('%s', (_, w, events, want) => {
    expect(workloadTrouble(w, events, now)).toEqual(want);
  });
});

const pod = (status: KPod['status'], nodeName: string | null = 'gpu-1'): KPod => ({
  metadata: { name: 'llmgw-qwen-h100-7c5d-abcde', uid: 'u1' },
  spec: { containers: [{ name: 'engine' }], ...(nodeName === null ? {} : { nodeName }) },
  status,
});

describe('podTrouble', () => {
  const mount = event(
    'Pod',
    'llmgw-qwen-h100-7c5d-abcde',
    'FailedMount',
    'MountVolume.SetUp failed for volume "models" : persistentvolumeclaim "models" not found',
    { uid: 'u1' },
  );
  it.each([
    [
      'a FailedMount fails a scheduled pending pod',
      pod({ phase: 'Pending' }),
      { state: 'starting', reason: 'engine: ContainerCreating' },
      [mount],
      {
        state: 'failed',
        reason:
          'pod llmgw-qwen-h100-7c5d-abcde: FailedMount: MountVolume.SetUp failed for volume "models" : persistentvolumeclaim "models" not found — create the PersistentVolumeClaim "models" in the namespace, or set kubernetes.models.pvc to one that exists',
      },
    ],
    [
      "not another pod's (by uid) of the same name",
      pod({ phase: 'Pending' }),
      { state: 'starting', reason: 'engine: ContainerCreating' },
      [{ ...mount, involvedObject: { ...mount.involvedObject, uid: 'u0' } }],
      undefined,
    ],
    [
      "a pull's back-off with the registry's answer",
      pod({ phase: 'Pending' }),
      { state: 'failed', reason: 'engine: ImagePullBackOff: Back-off pulling image "x/vllm:1"' },
      [
        event(
          'Pod',
          'llmgw-qwen-h100-7c5d-abcde',
          'Failed',
          'Failed to pull image "x/vllm:1": manifest unknown',
          {
            uid: 'u1',
          },
        ),
        event('Pod', 'llmgw-qwen-h100-7c5d-abcde', 'Failed', 'Error: ImagePullBackOff', { uid: 'u1' }),
      ],
      {
        reason:
          'engine: ImagePullBackOff: Back-off pulling image "x/vllm:1"; the kubelet: Failed to pull image "x/vllm:1": manifest unknown — check the image\'s name and tag (and that the nodes reach its registry)',
      },
    ],
    [
      "the scheduler's words with what to do",
      pod({ phase: 'Pending' }, null),
      {
        state: 'pending',
        reason: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
      },
      [],
      {
        reason:
          "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. — no node has the labels the profile asks for (its gpu_class's product and memory): choose a class the nodes offer (llmgw ctl nodes), or label the nodes (GPU feature discovery does)",
      },
    ],
    ['nothing for a ready pod', pod({ phase: 'Running' }), { state: 'ready' }, [mount], undefined],
    [
      'nothing where the words say nothing to do',
      pod({ phase: 'Running' }),
      { state: 'starting', reason: 'the engine is loading (not ready yet)' },
      [],
      undefined,
    ],
  ])('%s', (_, p, base, events, want) => {
    expect(podTrouble(p, base, events, now)).toEqual(want);
  });
});

describe('remedy', () => {
  it.each([
    [
      'secret "hub-ca" not found',
      'create the Secret "hub-ca" in the namespace, or fix the name that refers to it',
    ],
    [
      'configmap "c" not found',
      'create the ConfigMap "c" in the namespace, or fix the name that refers to it',
    ],
    [
      'pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged',
      "the namespace's Pod Security level refuses the pod: run the models in a namespace whose level allows it",
    ],
    [
      '0/1 nodes are available: 1 Insufficient memory.',
      "no node has the CPU or memory free: add nodes or lower the model's requests",
    ],
    [
      '0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.',
      'the PVC is not bound: kubectl describe pvc says why (its StorageClass, its capacity)',
    ],
    ['container exited', undefined],
  ])('%s', (text, want) => {
    expect(remedy(text)).toBe(want);
  });
});
