import { describe, expect, it } from 'vitest';

import type { KPod } from './kube-types.js';
import { groupPods, podState, replicaView } from './pod-views.js';

const base = (
  name: string,
  status: KPod['status'],
  o: { node?: string; labels?: Record<string, string> } = {},
): KPod => ({
  metadata: {
    name,
    labels: { 'llmgw.io/model': 'qwen', 'llmgw.io/profile': 'h100', ...o.labels },
    annotations: { 'llmgw.io/model-name': 'qwen' },
    creationTimestamp: new Date('2026-01-01T00:00:00Z'),
  },
  spec: {
    ...(o.node === undefined ? {} : { nodeName: o.node }),
    containers: [{ name: 'engine', resources: { requests: { 'nvidia.com/gpu': '1' } } }],
  },
  status,
});
const scheduled = { type: 'PodScheduled', status: 'True' };

describe('podState', () => {
  it.each<[string, KPod, { state: string; reason?: string }]>([
    [
      'unschedulable: the scheduler’s words',
      base('p', {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: '0/3 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb.',
          },
        ],
      }),
      { state: 'pending', reason: '0/3 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb.' },
    ],
    [
      'image pull back-off: failed, with the kubelet’s message',
      base(
        'p',
        {
          phase: 'Pending',
          conditions: [scheduled],
          containerStatuses: [
            {
              name: 'engine',
              ready: false,
              restartCount: 0,
              image: 'x',
              imageID: '',
              state: {
                waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "vllm/x:1"' },
              },
            },
          ],
        },
        { node: 'n1' },
      ),
      { state: 'failed', reason: 'engine: ImagePullBackOff: Back-off pulling image "vllm/x:1"' },
    ],
    [
      'crash loop: failed, with the last exit',
      base(
        'p',
        {
          phase: 'Running',
          conditions: [scheduled],
          containerStatuses: [
            {
              name: 'engine',
              ready: false,
              restartCount: 4,
              image: 'x',
              imageID: '',
              state: {
                waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' },
              },
              lastState: { terminated: { exitCode: 1, reason: 'Error' } },
            },
          ],
        },
        { node: 'n1' },
      ),
      {
        state: 'failed',
        reason:
          'engine: CrashLoopBackOff: back-off 40s restarting failed container; last exit: exit code 1 (Error)',
      },
    ],
    [
      'downloading in its init container',
      base(
        'p',
        {
          phase: 'Pending',
          conditions: [scheduled],
          initContainerStatuses: [
            {
              name: 'download',
              ready: false,
              restartCount: 0,
              image: 'x',
              imageID: '',
              state: { running: {} },
            },
          ],
        },
        { node: 'n1' },
      ),
      { state: 'downloading', reason: "init container download is fetching the model's files" },
    ],
    [
      'running, not ready: starting',
      base(
        'p',
        { phase: 'Running', conditions: [scheduled, { type: 'Ready', status: 'False' }] },
        { node: 'n1' },
      ),
      { state: 'starting', reason: 'the engine is loading (not ready yet)' },
    ],
    [
      'ready',
      base(
        'p',
        { phase: 'Running', conditions: [scheduled, { type: 'Ready', status: 'True' }] },
        { node: 'n1' },
      ),
      { state: 'ready' },
    ],
    [
      'failed pod',
      base('p', { phase: 'Failed', message: 'The node was low on resource: memory.' }, { node: 'n1' }),
      { state: 'failed', reason: 'The node was low on resource: memory.' },
    ],
  ])('%s', (_, pod, want) => {
    expect(podState(pod)).toEqual(want);
  });
});

describe('replicaView', () => {
  it('is the pod: its name, node, endpoint and restarts', () => {
    const pod = base(
      'llmgw-qwen-h100-7d9f-abcde',
      {
        phase: 'Running',
        podIP: '10.1.2.3',
        conditions: [
          scheduled,
          { type: 'Ready', status: 'True', lastTransitionTime: new Date('2026-01-01T00:01:00Z') },
        ],
        containerStatuses: [
          { name: 'engine', ready: true, restartCount: 2, image: 'x', imageID: '', state: { running: {} } },
        ],
      },
      { node: 'gpu-1' },
    );
    expect(replicaView({ leader: pod, workers: [], engine: 'vllm', port: 8000 })).toEqual({
      id: 'llmgw-qwen-h100-7d9f-abcde',
      model: 'qwen',
      profile: 'h100',
      engine: 'vllm',
      state: 'ready',
      node: 'gpu-1',
      ready_since: '2026-01-01T00:01:00.000Z',
      restarts: 2,
      endpoint: 'http://10.1.2.3:8000',
      created_at: '2026-01-01T00:00:00.000Z',
      shards: [
        {
          rank: 0,
          node: 'gpu-1',
          devices: ['nvidia.com/gpu ×1'],
          port: 8000,
          state: 'ready',
          restarts: 2,
          ready_since: '2026-01-01T00:01:00.000Z',
        },
      ],
    });
  });

  it('groups a LeaderWorkerSet’s pods under the leader, as far as its furthest-behind pod', () => {
    const lws = (name: string, worker: string, ready: boolean) =>
      base(
        name,
        { phase: 'Running', conditions: [scheduled, { type: 'Ready', status: ready ? 'True' : 'False' }] },
        {
          node: `n-${worker}`,
          labels: {
            'leaderworkerset.sigs.k8s.io/name': 'llmgw-qwen-big',
            'leaderworkerset.sigs.k8s.io/group-index': '0',
            'leaderworkerset.sigs.k8s.io/worker-index': worker,
          },
        },
      );
    const groups = groupPods([
      lws('llmgw-qwen-big-0-1', '1', false),
      lws('llmgw-qwen-big-0', '0', true),
      base('solo', {}),
    ]);
    expect(groups.map((g) => [g.leader.metadata?.name, g.workers.map((w) => w.metadata?.name)])).toEqual([
      ['llmgw-qwen-big-0', ['llmgw-qwen-big-0-1']],
      ['solo', []],
    ]);
    const first = groups[0];
    if (first === undefined) throw new Error('no group');
    const v = replicaView({ ...first, engine: 'vllm', port: 8000 });
    expect(v.state).toBe('starting');
    expect(v.shards.map((s) => [s.rank, s.node, s.state])).toEqual([
      [0, 'n-0', 'ready'],
      [1, 'n-1', 'starting'],
    ]);
  });

  it("fails a group whose worker's volume does not mount, with the worker's event", () => {
    const member = (name: string, worker: string, phase: string, ready: boolean) =>
      base(
        name,
        { phase, conditions: [scheduled, { type: 'Ready', status: ready ? 'True' : 'False' }] },
        {
          node: `n-${worker}`,
          labels: {
            'leaderworkerset.sigs.k8s.io/name': 'llmgw-qwen-big',
            'leaderworkerset.sigs.k8s.io/group-index': '0',
            'leaderworkerset.sigs.k8s.io/worker-index': worker,
          },
        },
      );
    const now = Date.parse('2026-01-01T00:05:00Z');
    const events = [
      {
        metadata: { name: 'e1' },
        involvedObject: { kind: 'Pod', name: 'llmgw-qwen-big-0-1' },
        type: 'Warning',
        reason: 'FailedMount',
        message: 'MountVolume.SetUp failed for volume "models" : configmap "c" not found',
        lastTimestamp: new Date(now - 1000),
      },
    ];
    const v = replicaView({
      leader: member('llmgw-qwen-big-0', '0', 'Running', true),
      workers: [member('llmgw-qwen-big-0-1', '1', 'Pending', false)],
      engine: 'vllm',
      port: 8000,
      events,
      now,
    });
    expect([v.state, v.reason]).toEqual([
      'failed',
      'pod llmgw-qwen-big-0-1: FailedMount: MountVolume.SetUp failed for volume "models" : configmap "c" not found — create the ConfigMap "c" in the namespace, or fix the name that refers to it',
    ]);
    expect(v.shards.map((s) => s.state)).toEqual(['ready', 'failed']);
  });
});
