import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { KubernetesSettings } from '../src/config/schema.js';
import { ensureKeysSecret, keysFromCluster } from '../src/kube/keys-secret.js';

import { startFakeKubeApiServer, type FakeKubeApiServer } from './fakes/kube-apiserver/index.js';
import { startDaemon } from './support/cli.js';

/**
 * llmgw's own Secret in Kubernetes mode (src/kube/keys-secret.ts) against the fake API server:
 * made at the first start, the same values read at every later one, so that no render of the
 * Helm chart (which draws nothing) can change the keys the database was set up with.
 */

const ns = 'ai';
const decoded = (data: Record<string, string> | undefined, key: string) =>
  Buffer.from(data?.[key] ?? '', 'base64').toString('utf8');

describe('the keys Secret llmgw keeps in Kubernetes mode', () => {
  let kube: FakeKubeApiServer;
  let kubeconfig: string;
  let seq = 0;
  const settings = (name: string): KubernetesSettings => ({
    // Engines go elsewhere: the Secret is in the release's namespace the chart names.
    namespace: 'models',
    kubeconfig,
    context: '',
    models: { pvc: '', mount_path: '/models', downloader_image: '' },
    runtime_class: '',
    engine_port: 8000,
    service_account: '',
    keys_secret: { name, namespace: ns },
    resources: { cpu: '', memory: '' },
  });
  const fresh = () => `keys-${++seq}`;

  beforeAll(async () => {
    kube = await startFakeKubeApiServer({ namespaces: ['default', ns, 'models'] });
    kubeconfig = await kube.kubeconfig({ namespace: ns });
  });
  afterAll(async () => {
    await kube.close();
  });

  it('makes both keys at the first start and reads the same ones at the next', async () => {
    const name = fresh();
    const first = await keysFromCluster(settings(name), {});
    expect(first.adminKey).toMatch(/^llmgw_key_\w{32}$/);
    expect(first.engineKeySecret).toMatch(/^[0-9a-f]{64}$/);
    expect(first.engineKeySource).toBe(`the Secret ai/${name} (key engine-key-secret)`);
    const stored = kube.get('Secret', ns, name);
    expect(decoded(stored?.['data'], 'admin-key')).toBe(first.adminKey);
    expect(decoded(stored?.['data'], 'engine-key-secret')).toBe(first.engineKeySecret);
    // Owned by llmgw, and not labelled as any Helm release's or Argo CD application's.
    expect(stored?.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'llmgw',
      'app.kubernetes.io/part-of': 'llmgw',
    });
    expect(kube.get('Secret', 'models', name)).toBeUndefined();

    const version = stored?.metadata.resourceVersion;
    const second = await keysFromCluster(settings(name), {});
    expect(second).toEqual(first);
    expect(kube.get('Secret', ns, name)?.metadata.resourceVersion).toBe(version);
  });

  it('reads the Secret an earlier chart made with lookup, unchanged (an upgrade keeps its keys)', async () => {
    const name = fresh();
    const [admin, engine] = ['A'.repeat(48), 'E'.repeat(64)];
    kube.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: ns,
        labels: { 'app.kubernetes.io/managed-by': 'Helm' },
        annotations: { 'helm.sh/resource-policy': 'keep' },
      },
      type: 'Opaque',
      data: {
        'admin-key': Buffer.from(admin).toString('base64'),
        'engine-key-secret': Buffer.from(engine).toString('base64'),
      },
    });
    const version = kube.get('Secret', ns, name)?.metadata.resourceVersion;
    expect(await keysFromCluster(settings(name), {})).toMatchObject({
      adminKey: admin,
      engineKeySecret: engine,
    });
    expect(kube.get('Secret', ns, name)?.metadata.resourceVersion).toBe(version);
  });

  it('keeps only what the environment does not give, and adds a missing key to a Secret there', async () => {
    const name = fresh();
    const given = 'G'.repeat(30);
    const keys = await keysFromCluster(settings(name), { adminKey: given });
    expect(keys.adminKey).toBe(given);
    const data = kube.get('Secret', ns, name)?.['data'] as Record<string, string>;
    expect(Object.keys(data)).toEqual(['engine-key-secret']);

    // Later the admin key is no longer given: it is added beside the engine key secret, which stays.
    const later = await keysFromCluster(settings(name), {});
    expect(later.engineKeySecret).toBe(keys.engineKeySecret);
    expect(later.adminKey).toMatch(/^llmgw_key_/);
    expect(decoded(kube.get('Secret', ns, name)?.['data'], 'admin-key')).toBe(later.adminKey);

    // Both given: the cluster is not asked.
    const both = { adminKey: given, engineKeySecret: 'S'.repeat(40) };
    expect(await keysFromCluster(settings(fresh()), both)).toEqual(both);
    expect(await keysFromCluster({ ...settings(''), keys_secret: { name: '', namespace: '' } }, {})).toEqual(
      {},
    );
  });

  it('gives control planes starting together the same values', async () => {
    const name = fresh();
    const all = await Promise.all(
      Array.from({ length: 4 }, () =>
        ensureKeysSecret({
          kubeconfig,
          context: '',
          namespace: ns,
          name,
          want: ['adminKey', 'engineKeySecret'],
        }),
      ),
    );
    for (const k of all) expect(k).toEqual(all[0]);
    expect(decoded(kube.get('Secret', ns, name)?.['data'], 'engine-key-secret')).toBe(
      all[0]?.engineKeySecret,
    );
  });

  it('llmgw server keeps its keys there: the admin key works, and a restart reads the same Secret', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-keys-secret-'));
    const name = fresh();
    try {
      const config = join(dir, 'config.yaml');
      writeFileSync(
        config,
        [
          'kubernetes:',
          '  namespace: models',
          `  kubeconfig: ${kubeconfig}`,
          '  keys_secret:',
          `    name: ${name}`,
          `    namespace: ${ns}`,
        ].join('\n'),
      );
      const env = {
        LLMGW_LISTEN: '127.0.0.1:0',
        LLMGW_CONFIG: config,
        LLMGW_DATA_DIR: join(dir, 'data'),
      };
      const adminKeyWorks = async (url: string, key: string) =>
        (await fetch(`${url}/api/v1/keys`, { headers: { authorization: `Bearer ${key}` } })).status;
      const versions: (string | undefined)[] = [];
      for (let start = 0; start < 2; start++) {
        const server = startDaemon(['server'], env, dir);
        try {
          const url = (await server.waitFor(/"url":"(http:\/\/[\d.:]+)"/))[1] ?? '';
          const secret = kube.get('Secret', ns, name);
          versions.push(secret?.metadata.resourceVersion);
          const adminKey = decoded(secret?.['data'], 'admin-key');
          expect(await adminKeyWorks(url, adminKey)).toBe(200);
          // The engine keys' secret came from the Secret: none was made in the data dir.
          expect(existsSync(join(dir, 'data', 'engine-key.secret'))).toBe(false);
          // Not shown in the log: it is in the Secret, where the chart's NOTES.txt says to read it.
          expect(server.output()).not.toContain(adminKey);
        } finally {
          expect(await server.stop('SIGTERM')).toBe(0);
        }
      }
      expect(versions[0]).toBeDefined();
      expect(versions[1]).toBe(versions[0]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start, in words, when its service account may not make the Secret', async () => {
    const name = fresh();
    kube.forbid('create', 'secrets');
    try {
      await expect(keysFromCluster(settings(name), {})).rejects.toThrow(
        `could not create secrets ${name} in namespace ai: the Kubernetes API says: secrets is forbidden: User "fake" cannot create resource "secrets" in API group "" in the namespace "ai" (403); llmgw's service account may not create secrets in ai: grant it in the Role`,
      );
    } finally {
      kube.allow('create', 'secrets');
    }
    await expect(keysFromCluster(settings(name), {})).resolves.toMatchObject({
      adminKey: expect.any(String),
    });
  });
});
