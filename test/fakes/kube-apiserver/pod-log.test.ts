import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeKubeApiServer, startFakeKubeApiServer } from './index.js';

/**
 * GET .../pods/NAME/log as the API server relays the kubelet's answer: text/plain, tailLines,
 * the container checked, follow streamed until the container ends, a container not started
 * yet refused with its waiting reason.
 */
describe('fake kube-apiserver: pod logs', () => {
  let kube: FakeKubeApiServer;
  const logs = new Map<string, string>();
  /** Pods whose kubelet hook has not returned yet (their containers are being created). */
  const held = new Set<string>();
  const release = new Map<string, () => void>();

  const pod = (name: string, o: { containers?: string[]; gpus?: number } = {}) =>
    kube.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default' },
      spec: {
        containers: (o.containers ?? ['engine']).map((c) => ({
          name: c,
          image: 'vllm/vllm-openai:v0.11.0',
          ...(o.gpus === undefined ? {} : { resources: { limits: { 'nvidia.com/gpu': String(o.gpus) } } }),
        })),
      },
    });
  const get = (path: string) =>
    fetch(`${kube.url}/api/v1/namespaces/default/pods/${path}`, {
      headers: { authorization: `Bearer ${kube.token ?? ''}` },
    });
  const running = (name: string) =>
    kube.waitFor(() => kube.get('Pod', 'default', name)?.status?.phase === 'Running', 5000);

  beforeAll(async () => {
    kube = await startFakeKubeApiServer({
      nodes: [{ name: 'gpu-a', allocatable: { 'nvidia.com/gpu': 1 } }],
      kubelet: async (p) => {
        const name = p.metadata.name;
        if (held.has(name)) await new Promise<void>((r) => release.set(name, r));
        return { ip: '10.0.0.1', ready: true, logs: (c) => logs.get(`${name}/${c}`) ?? '' };
      },
    });
  });
  afterAll(async () => {
    for (const r of release.values()) r();
    await kube.close();
  });

  it('answers the last tailLines lines of the container named, as text/plain', async () => {
    logs.set('two/engine', 'one\ntwo\nthree\n');
    logs.set('two/sidecar', 'side\n');
    pod('two', { containers: ['engine', 'sidecar'] });
    await running('two');
    const r = await get('two/log?container=engine&tailLines=2');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain');
    expect(await r.text()).toBe('two\nthree\n');
    expect(await (await get('two/log?container=engine')).text()).toBe('one\ntwo\nthree\n');
    expect(await (await get('two/log?container=engine&tailLines=0')).text()).toBe('');
    expect(await (await get('two/log?container=sidecar')).text()).toBe('side\n');
  });

  it('refuses a container the pod does not have, and none named when it has several', async () => {
    const wrong = await get('two/log?container=nope');
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({
      kind: 'Status',
      reason: 'BadRequest',
      message: 'container nope is not valid for pod two',
    });
    const none = await get('two/log');
    expect(none.status).toBe(400);
    expect(((await none.json()) as { message: string }).message).toBe(
      'a container name must be specified for pod two, choose one of: [engine sidecar]',
    );
    const negative = await get('two/log?container=engine&tailLines=-1');
    expect(negative.status).toBe(422);
    expect(((await negative.json()) as { message: string }).message).toBe(
      'PodLogOptions "two" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
    );
  });

  it("answers 403 in the authorizer's words once RBAC denies pods/log", async () => {
    kube.forbid('get', 'pods/log');
    try {
      const r = await get('two/log?container=engine');
      expect(r.status).toBe(403);
      expect(await r.json()).toMatchObject({
        reason: 'Forbidden',
        message:
          'pods "two" is forbidden: User "fake" cannot get resource "pods/log" in API group "" in the namespace "default"',
      });
      // The pod itself may still be read.
      expect((await get('two')).status).toBe(200);
    } finally {
      kube.allow('get', 'pods/log');
    }
  });

  it('follows: the tail, then each new chunk, until the pod ends', async () => {
    logs.set('f/engine', 'a\nb\n');
    pod('f');
    await running('f');
    const r = await get('f/log?follow=true&tailLines=1');
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    const decoder = new TextDecoder();
    const read = async () => decoder.decode((await reader.read()).value);
    expect(await read()).toBe('b\n');
    logs.set('f/engine', 'a\nb\nc\n');
    expect(await read()).toBe('c\n');
    kube.deletePod('default', 'f');
    expect((await reader.read()).done).toBe(true);
  });

  it('answers an empty log for a pod not on a node yet, and 400 for a container not started', async () => {
    // The node's one GPU is taken by nothing else here: two GPUs fit nowhere.
    pod('unplaced', { gpus: 2 });
    await kube.waitFor(() =>
      kube.events({ involvedName: 'unplaced' }).some((e) => e['reason'] === 'FailedScheduling'),
    );
    const r = await get('unplaced/log');
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('');

    held.add('creating');
    pod('creating');
    await kube.waitFor(() => release.has('creating'), 5000);
    const waiting = await get('creating/log?container=engine');
    expect(waiting.status).toBe(400);
    expect(((await waiting.json()) as { message: string }).message).toBe(
      'container "engine" in pod "creating" is waiting to start: ContainerCreating',
    );
    release.get('creating')!();
    await running('creating');
    expect((await get('creating/log?container=engine')).status).toBe(200);
  });
});
