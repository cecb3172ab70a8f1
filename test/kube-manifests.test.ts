import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

import { freePort } from './fakes/engines/fake-engines.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from './fakes/kube-apiserver/index.js';
import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';

// Issue 28: `llmgw ctl` prints the exact Kubernetes objects llmgw would write for a model,
// writing nothing (`--dry-run -o yaml`, as kubectl does), so an operator can review them or
// commit them to Git; and the objects it writes for a model of the catalog.

const ns = 'llmgw';

/** An object as printed: read loosely, as a test of its fields does. */
interface KubeDoc {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec: { replicas?: number; template: { spec: { containers: { resources: { requests: object } }[] } } };
}
const h100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' };
const chat = [
  'name: chat',
  'source: hf://org/repo',
  'replicas: 2',
  'profiles:',
  '  - name: h100',
  '    engine: vllm',
  '    gpu_class: h100-80g',
  '',
].join('\n');

describe('the Kubernetes objects of a model, printed and written nowhere', () => {
  let kube: FakeKubeApiServer;
  let t: TestControlPlane;
  let dir = '';
  let env: Record<string, string>;
  const ctl = (...args: string[]) => llmgw(['ctl', ...args], env);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-kube-manifests-'));
    writeFileSync(join(dir, 'chat.yaml'), chat);
    writeFileSync(join(dir, 'other.yaml'), chat.replace('name: chat', 'name: other'));
    kube = await startFakeKubeApiServer({
      namespaces: ['default', ns],
      nodes: [{ name: 'gpu-1', labels: h100, allocatable: { 'nvidia.com/gpu': '2' } }],
    });
    t = await startControlPlane({
      config: [
        'kubernetes:',
        `  namespace: ${ns}`,
        `  kubeconfig: ${await kube.kubeconfig({ namespace: ns })}`,
        `  engine_port: ${await freePort()}`,
        '  models: {pvc: models}',
      ].join('\n'),
    });
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
  }, 30_000);
  afterAll(async () => {
    await t.stop();
    await kube.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('add --dry-run -o yaml prints the Deployment it would write; nothing is stored or written', async () => {
    const r = await ctl('model', 'add', '-f', join(dir, 'chat.yaml'), '--dry-run', '-o', 'yaml');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as KubeDoc);
    expect(docs).toHaveLength(1);
    const [d] = docs;
    expect(d).toMatchObject({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'llmgw-chat-h100', namespace: ns, labels: { 'llmgw.io/model': 'chat' } },
      spec: { replicas: 2 },
    });
    expect(d?.spec.template.spec.containers[0]?.resources.requests).toMatchObject({ 'nvidia.com/gpu': '1' });
    expect((await api(t.url, t.adminKey, 'GET', '/models/chat')).status).toBe(404);
    expect(kube.get('Deployment', ns, 'llmgw-chat-h100')).toBeUndefined();

    const json = await ctl('model', 'add', '-f', join(dir, 'chat.yaml'), '--dry-run', '-o', 'json');
    expect(JSON.parse(json.stdout)).toMatchObject({
      apiVersion: 'v1',
      kind: 'List',
      items: [{ kind: 'Deployment' }],
    });

    const words = await ctl('model', 'add', '-f', join(dir, 'chat.yaml'), '--dry-run');
    expect(words.stdout.trimEnd().split('\n')).toEqual([
      'model "chat" checked: it would be added (2 replicas); nothing stored',
      `would write Deployment/llmgw-chat-h100 in namespace ${ns} (-o yaml prints it)`,
    ]);
  });

  it('prints what it writes: ctl model manifests matches the Deployment in the cluster', async () => {
    expect((await ctl('model', 'add', '-f', join(dir, 'chat.yaml'))).code).toBe(0);
    const written = await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-chat-h100'), 10_000);
    const r = await ctl('model', 'manifests', 'chat');
    expect(r.stderr).toBe('');
    const [printed] = parseAllDocuments(r.stdout).map((d) => d.toJS() as KubeDoc);
    // Every field printed is what was written (the API server adds its defaults to the rest).
    expect(written.spec).toMatchObject(printed?.spec ?? {});
    expect(printed?.metadata.annotations).toEqual(written.metadata.annotations);
  });

  it('refuses an add that would be refused, as the add would, and a format it does not print', async () => {
    const exists = await ctl('model', 'add', '-f', join(dir, 'chat.yaml'), '--dry-run', '-o', 'yaml');
    expect(exists.code).toBe(1);
    expect(exists.stderr).toContain(
      'model "chat" already exists: change it with llmgw ctl model apply -f FILE, or pick another name',
    );
    const bad = await ctl('model', 'add', '-f', join(dir, 'other.yaml'), '--dry-run', '-o', 'wide');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('-o is yaml or json (the objects as Kubernetes reads them), not "wide"');
    const noDry = await ctl('model', 'add', '-f', join(dir, 'other.yaml'), '-o', 'yaml');
    expect(noDry.code).toBe(2);
    expect(noDry.stderr).toContain('-o prints what --dry-run would write: add --dry-run');
    expect((await api(t.url, t.adminKey, 'GET', '/models/other')).status).toBe(404);
  });
});

describe('the Kubernetes objects of a model where engines run on agents', () => {
  let t: TestControlPlane;
  let dir = '';
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-agent-manifests-'));
    writeFileSync(join(dir, 'chat.yaml'), chat);
    t = await startControlPlane();
  });
  afterAll(async () => {
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('checks a dry run of an add, and refuses to print objects it does not write, in words', async () => {
    const env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    const refusal =
      'this control plane runs engines on its node agents and writes no Kubernetes objects: add a kubernetes section to its settings to run engines as Kubernetes pods (docs/kubernetes.md)';
    const words = await llmgw(['ctl', 'model', 'add', '-f', join(dir, 'chat.yaml'), '--dry-run'], env);
    expect(words.code).toBe(0);
    expect(words.stdout.trimEnd().split('\n')).toEqual([
      'model "chat" checked: it would be added (2 replicas); nothing stored',
      refusal,
    ]);
    const yaml = await llmgw(
      ['ctl', 'model', 'add', '-f', join(dir, 'chat.yaml'), '--dry-run', '-o', 'yaml'],
      env,
    );
    expect(yaml.code).toBe(1);
    expect(yaml.stderr).toContain(refusal);
    expect((await api(t.url, t.adminKey, 'GET', '/models/chat')).status).toBe(404);
  });
});
