import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';

import { Ajv } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

import { parseSettings } from '../src/config/index.js';

import { resourceByKind, validateObject } from './fakes/kube-apiserver/index.js';

/**
 * deploy/helm/llmgw rendered as `helm template` renders it: by helm when it is on PATH, else by
 * test/tools/helm-template (Go's text/template, the engine helm uses, with helm's built-ins and
 * the Sprig functions the chart calls). Each rendering is parsed and checked: objects the API
 * server would take, settings llmgw itself accepts, RBAC for what its Kubernetes mode does,
 * and refusals with what to set.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const chartDir = join(root, 'deploy/helm/llmgw');
const toolDir = join(root, 'test/tools/helm-template');
const work = mkdtempSync(join(tmpdir(), 'llmgw-helm-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const onPath = (cmd: string, arg: string) => spawnSync(cmd, [arg], { stdio: 'ignore' }).status === 0;
const helm = onPath('helm', 'version');
const go = onPath('go', 'version');
const renderer = helm ? 'helm' : go ? 'go' : undefined;
if (renderer === undefined) {
  console.warn(
    'helm-chart.test.ts skipped: neither helm nor go is on PATH (apt-get install golang-go; .ci/run does)',
  );
}

/** The Go renderer, built once per source hash into the temp dir (node_modules may be shared). */
function goRenderer(): string {
  const sources = ['go.mod', 'main.go', 'yaml.go'];
  const hash = createHash('sha256');
  for (const f of sources) hash.update(readFileSync(join(toolDir, f)));
  const tag = hash.digest('hex').slice(0, 16);
  const cacheRoot = join(tmpdir(), 'llmgw-helm-template');
  const bin = join(cacheRoot, tag, 'helm-template');
  if (existsSync(bin)) return bin;
  mkdirSync(join(cacheRoot, tag), { recursive: true });
  const tmp = `${bin}.${process.pid}.tmp`;
  execFileSync('go', ['build', '-o', tmp, '.'], {
    cwd: toolDir,
    env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  renameSync(tmp, bin);
  return bin;
}

const asJson = (yamlPath: string, name: string) => {
  const p = join(work, name);
  writeFileSync(p, JSON.stringify(parseYaml(readFileSync(yamlPath, 'utf8'))));
  return p;
};

let goArgs: string[] | undefined;
function baseGoArgs(): string[] {
  goArgs ??= [
    '--chart',
    chartDir,
    '--chart-json',
    asJson(join(chartDir, 'Chart.yaml'), 'chart.json'),
    '--defaults-json',
    asJson(join(chartDir, 'values.yaml'), 'values.json'),
  ];
  return goArgs;
}

interface Rendered {
  ok: boolean;
  out: string;
  err: string;
}

let seq = 0;
/** Renders the chart with `values` over values.yaml (a JSON file, which both helm and the tool take). */
function render(values: object, o: { name?: string; namespace?: string } = {}): Rendered {
  const file = join(work, `values-${++seq}.json`);
  writeFileSync(file, JSON.stringify(values));
  const name = o.name ?? 'demo';
  const namespace = o.namespace ?? 'ai';
  const r =
    renderer === 'helm'
      ? spawnSync('helm', ['template', name, chartDir, '--namespace', namespace, '-f', file], {
          encoding: 'utf8',
        })
      : spawnSync(
          goRenderer(),
          [...baseGoArgs(), '--values-json', file, '--name', name, '--namespace', namespace],
          { encoding: 'utf8' },
        );
  return { ok: r.status === 0, out: r.stdout, err: r.stderr };
}

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
} & Record<string, unknown>;

function objects(values: object, o?: { name?: string; namespace?: string }): Obj[] {
  const r = render(values, o);
  if (!r.ok) throw new Error(`rendering failed: ${r.err}`);
  const docs = parseAllDocuments(r.out);
  for (const d of docs) expect(d.errors, String(d.errors[0])).toEqual([]);
  const objs = docs.map((d) => d.toJS() as Obj | null).filter((x): x is Obj => x !== null);
  for (const obj of objs) checkObject(obj);
  return objs;
}

const one = (objs: Obj[], kind: string, name?: string): Obj => {
  const found = objs.filter((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
  return found[0] as Obj;
};

// Structural checks where the API server would refuse: names, labels, references inside the pod.
const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const clusterScoped = new Set(['ClusterRole', 'ClusterRoleBinding']);

function checkObject(obj: Obj): void {
  const what = `${obj.kind} ${obj.metadata.name}`;
  // What the real server would refuse (strict decoding, then the kind's validation), per the fake.
  expect(resourceByKind(obj.apiVersion, obj.kind), `${obj.apiVersion} ${obj.kind} served`).toBeDefined();
  expect(validateObject(obj), what).toEqual([]);
  expect(obj.apiVersion, what).toMatch(/^([a-z0-9.-]+\/)?v\d+((alpha|beta)\d+)?$/);
  expect(obj.metadata.name.length, what).toBeLessThanOrEqual(obj.kind === 'Service' ? 63 : 253);
  expect(obj.metadata.name, what).toMatch(obj.kind === 'Service' ? dns1123Label : dns1123Subdomain);
  if (clusterScoped.has(obj.kind)) expect(obj.metadata.namespace, what).toBeUndefined();
  else expect(obj.metadata.namespace, what).toMatch(dns1123Label);
  for (const [k, v] of Object.entries(obj.metadata.labels ?? {})) {
    expect(v.length, `${what} label ${k}`).toBeLessThanOrEqual(63);
    expect(v, `${what} label ${k}`).toMatch(labelValue);
  }
  if (obj.kind === 'Deployment') checkDeployment(obj);
}

interface Container {
  name: string;
  ports?: { name: string; containerPort: number }[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  volumeMounts?: { name: string; mountPath: string }[];
  securityContext?: Record<string, unknown>;
  [k: string]: unknown;
}
interface PodSpec {
  containers: Container[];
  volumes: ({ name: string } & Record<string, unknown>)[];
  securityContext: Record<string, unknown>;
  serviceAccountName: string;
}
type DeploymentObj = Obj & {
  spec: {
    replicas: number;
    strategy: { type: string };
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
};

function checkDeployment(obj: Obj): void {
  const d = obj as DeploymentObj;
  const labels = d.spec.template.metadata.labels;
  for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) expect(labels[k]).toBe(v);
  const pod = d.spec.template.spec;
  const volumes = new Set(pod.volumes.map((v) => v.name));
  for (const c of pod.containers) {
    for (const m of c.volumeMounts ?? []) expect(volumes, `${c.name} mounts ${m.name}`).toContain(m.name);
    for (const p of c.ports ?? []) expect(p.name.length).toBeLessThanOrEqual(15);
  }
}

const deployment = (objs: Obj[]) => one(objs, 'Deployment') as DeploymentObj;
const container = (objs: Obj[]) => deployment(objs).spec.template.spec.containers[0] as Container;
const envOf = (objs: Obj[], name: string) => container(objs).env?.find((e) => e.name === name);
const settingsText = (objs: Obj[]) =>
  (one(objs, 'ConfigMap')['data'] as Record<string, string>)['config.yaml'] ?? '';

/** The settings file as llmgw loads it, with the environment the pod gives it. */
function loadChartSettings(objs: Obj[]): Record<string, unknown> {
  const text = settingsText(objs);
  const env: NodeJS.ProcessEnv = {};
  if (envOf(objs, 'LLMGW_DATABASE') !== undefined)
    env['LLMGW_DATABASE'] = 'postgres://llmgw:pw@pg:5432/llmgw';
  const raw = parseYaml(text) as Record<string, unknown>;
  const loaded = parseSettings(text, { path: '/etc/llmgw/config.yaml', env, cwd: '/' });
  expect(loaded.settings.kubernetes).toBeDefined();
  return { ...loaded.settings, raw };
}

describe.skipIf(renderer === undefined)(`the Helm chart (rendered by ${renderer ?? 'nothing'})`, () => {
  it('renders the defaults: one control plane on SQLite on a PVC, keys it makes itself, HTTPS probes', () => {
    const objs = objects({});
    expect(objs.map((o) => o.kind).sort()).toEqual(
      [
        'ClusterRole',
        'ClusterRoleBinding',
        'ConfigMap',
        'Deployment',
        'PersistentVolumeClaim',
        'Pod',
        'Role',
        'Role',
        'RoleBinding',
        'RoleBinding',
        'Service',
        'ServiceAccount',
      ].sort(),
    );
    const d = deployment(objs);
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.strategy.type).toBe('Recreate');
    expect(d.metadata.labels).toMatchObject({
      'app.kubernetes.io/name': 'llmgw',
      'app.kubernetes.io/instance': 'demo',
      'app.kubernetes.io/managed-by': 'Helm',
      'app.kubernetes.io/version': JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version,
    });
    const pod = d.spec.template.spec;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true });
    const c = container(objs);
    expect(c.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(c['readinessProbe']).toMatchObject({
      httpGet: { path: '/api/v1/health', port: 'api', scheme: 'HTTPS' },
    });
    expect(c['startupProbe']).toMatchObject({ httpGet: { path: '/api/v1/health', scheme: 'HTTPS' } });
    // Liveness does not ask the database: an outage of it must not restart the control planes.
    expect(c['livenessProbe']).toEqual(expect.objectContaining({ tcpSocket: { port: 'api' } }));
    const pvc = one(objs, 'PersistentVolumeClaim');
    expect(pod.volumes.find((v) => v.name === 'data')).toEqual({
      name: 'data',
      persistentVolumeClaim: { claimName: pvc.metadata.name },
    });

    // The admin key and the engine key secret: made by llmgw at its first start, in the Secret
    // its settings name (the one earlier charts made), not drawn by the chart.
    expect(envOf(objs, 'LLMGW_ADMIN_KEY')).toBeUndefined();
    expect(envOf(objs, 'LLMGW_ENGINE_KEY_SECRET')).toBeUndefined();

    // The Service reaches the pod's port by name.
    const svc = one(objs, 'Service') as Obj & {
      spec: { selector: Record<string, string>; ports: { port: number; targetPort: string }[] };
    };
    for (const [k, v] of Object.entries(svc.spec.selector))
      expect(d.spec.template.metadata.labels[k]).toBe(v);
    expect(c.ports?.map((p) => p.name)).toContain(svc.spec.ports[0]?.targetPort);

    const s = loadChartSettings(objs);
    expect(s['listen']).toBe('0.0.0.0:8080');
    expect(s['database']).toBe('sqlite:/var/lib/llmgw/data/llmgw.db');
    expect(c.volumeMounts?.find((m) => m.name === 'data')?.mountPath).toBe('/var/lib/llmgw');
    const raw = s['raw'] as { kubernetes: Record<string, unknown>; tls: { san: string[] } };
    expect(raw.kubernetes).toEqual({
      namespace: 'ai',
      engine_port: 8000,
      models: { mount_path: '/models', downloader_image: 'ghcr.io/llmgw/llmgw:0.1.0' },
      keys_secret: { name: 'demo-llmgw', namespace: 'ai' },
    });
    expect(raw.tls.san).toContain('demo-llmgw.ai.svc');
  });

  it('serves plain HTTP behind a terminating proxy, with more settings and environment merged in', () => {
    const objs = objects({
      tls: { enabled: false },
      settings: { gateway: { workers: 4, queue: { max_per_model: 64 } } },
      // Values YAML would read as another type stay strings in the pod spec.
      extraEnv: [
        { name: 'LLMGW_LOG_LEVEL', value: 'debug' },
        { name: 'FLAG', value: 'true' },
        { name: 'PORT', value: '8080' },
      ],
    });
    const c = container(objs);
    expect(c['readinessProbe']).toMatchObject({ httpGet: { scheme: 'HTTP' } });
    expect(envOf(objs, 'FLAG')?.value).toBe('true');
    expect(envOf(objs, 'PORT')?.value).toBe('8080');
    const svc = one(objs, 'Service') as Obj & { spec: { ports: { name: string }[] } };
    expect(svc.spec.ports[0]?.name).toBe('http');
    const s = loadChartSettings(objs) as {
      tls: { enabled?: boolean };
      gateway: { workers: unknown; queue: unknown };
    };
    expect(s.tls.enabled).toBe(false);
    expect(s.gateway.workers).toBe(4);
    expect(s.gateway.queue).toMatchObject({ max_per_model: 64, timeout_s: 30 });
  });

  it('runs several control planes on PostgreSQL, the URL from a Secret', () => {
    const objs = objects({
      replicaCount: 2,
      database: { type: 'postgresql', existingSecret: 'llmgw-pg' },
    });
    const d = deployment(objs);
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.strategy.type).toBe('RollingUpdate');
    expect(envOf(objs, 'LLMGW_DATABASE')?.valueFrom?.secretKeyRef).toEqual({ name: 'llmgw-pg', key: 'url' });
    expect(objs.some((o) => o.kind === 'PersistentVolumeClaim')).toBe(false);
    expect(d.spec.template.spec.volumes.find((v) => v.name === 'data')).toEqual({
      name: 'data',
      emptyDir: {},
    });
    expect(one(objs, 'PodDisruptionBudget')['spec']).toMatchObject({ maxUnavailable: 1 });
    const s = loadChartSettings(objs);
    expect(s['database']).toBe('postgres://llmgw:pw@pg:5432/llmgw');
    expect((s['raw'] as Record<string, unknown>)['database']).toBeUndefined();
  });

  it('keeps SQLite on an existing claim, with existing keys and TLS from a Secret', () => {
    const objs = objects({
      persistence: { existingClaim: 'llmgw-db' },
      adminKey: { existingSecret: 'ops-admin' },
      engineKeySecret: { existingSecret: 'ops-engine', secretKey: 'secret' },
      tls: { existingSecret: 'llmgw-tls', san: ['llmgw.example.com'] },
    });
    expect(objs.some((o) => o.kind === 'PersistentVolumeClaim' || o.kind === 'Secret')).toBe(false);
    // Both keys given: llmgw keeps none of its own, and is granted no Secret of the release's namespace.
    expect(objs.filter((o) => o.kind === 'Role').map((o) => o.metadata.name)).toEqual(['demo-llmgw']);
    const pod = deployment(objs).spec.template.spec;
    expect(pod.volumes.find((v) => v.name === 'data')).toMatchObject({
      persistentVolumeClaim: { claimName: 'llmgw-db' },
    });
    expect(pod.volumes.find((v) => v.name === 'tls')).toMatchObject({ secret: { secretName: 'llmgw-tls' } });
    expect(envOf(objs, 'LLMGW_ADMIN_KEY')?.valueFrom?.secretKeyRef).toEqual({
      name: 'ops-admin',
      key: 'admin-key',
    });
    expect(envOf(objs, 'LLMGW_ENGINE_KEY_SECRET')?.valueFrom?.secretKeyRef).toEqual({
      name: 'ops-engine',
      key: 'secret',
    });
    const s = loadChartSettings(objs) as {
      tls: { cert: string; key: string; san: string[] };
      kubernetes: { keys_secret: { name: string } };
    };
    expect(s.kubernetes.keys_secret.name).toBe('');
    expect(s.tls).toMatchObject({ cert: '/etc/llmgw/tls/tls.crt', key: '/etc/llmgw/tls/tls.key' });
    expect(s.tls.san).toContain('llmgw.example.com');
  });

  it('mounts a models PVC (ReadOnlyMany) in another namespace, where its Role goes', () => {
    const objs = objects({
      kubernetes: {
        namespace: 'llmgw-models',
        models: { pvc: 'llmgw-models', create: true, size: '2Ti' },
        runtimeClass: 'nvidia',
        enginePort: 9000,
      },
    });
    const models = one(objs, 'PersistentVolumeClaim', 'llmgw-models');
    expect(models.metadata.namespace).toBe('llmgw-models');
    expect(models['spec']).toMatchObject({
      accessModes: ['ReadOnlyMany'],
      resources: { requests: { storage: '2Ti' } },
    });
    expect(one(objs, 'Role', 'demo-llmgw').metadata.namespace).toBe('llmgw-models');
    // llmgw's own Secret stays in the release's namespace, where its Role is.
    expect(one(objs, 'Role', 'demo-llmgw-keys').metadata.namespace).toBe('ai');
    const binding = one(objs, 'RoleBinding', 'demo-llmgw');
    expect(binding.metadata.namespace).toBe('llmgw-models');
    expect(binding['subjects']).toEqual([
      { kind: 'ServiceAccount', name: one(objs, 'ServiceAccount').metadata.name, namespace: 'ai' },
    ]);
    const raw = loadChartSettings(objs)['raw'] as { kubernetes: Record<string, unknown> };
    expect(raw.kubernetes).toEqual({
      namespace: 'llmgw-models',
      engine_port: 9000,
      runtime_class: 'nvidia',
      models: { pvc: 'llmgw-models', mount_path: '/models' },
      keys_secret: { name: 'demo-llmgw', namespace: 'ai' },
    });
  });

  it('renders an InferencePool over one model’s engine pods, and an Ingress, when asked', () => {
    const objs = objects({
      inferencePool: { enabled: true, model: 'llama-3-8b', endpointPicker: { service: 'llama-epp' } },
      ingress: {
        enabled: true,
        className: 'nginx',
        tls: [{ hosts: ['llmgw.example.com'], secretName: 'web' }],
      },
    });
    const pool = one(objs, 'InferencePool');
    expect(pool.apiVersion).toBe('inference.networking.k8s.io/v1');
    expect(pool['spec']).toEqual({
      selector: { matchLabels: { 'app.kubernetes.io/managed-by': 'llmgw', 'llmgw.io/model': 'llama-3-8b' } },
      targetPorts: [{ number: 8000 }],
      endpointPickerRef: {
        kind: 'Service',
        name: 'llama-epp',
        port: { number: 9002 },
        failureMode: 'FailClose',
      },
    });
    const ingress = one(objs, 'Ingress') as Obj & { spec: { rules: { http: { paths: unknown[] } }[] } };
    expect(ingress.spec.rules[0]?.http.paths[0]).toMatchObject({
      backend: { service: { name: 'demo-llmgw', port: { name: 'https' } } },
    });
  });

  it('grants what llmgw’s Kubernetes mode does, and no more', () => {
    const objs = objects({});
    type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
    const rules = (kind: string, name = 'demo-llmgw-ai') =>
      one(objs, kind, kind === 'Role' ? 'demo-llmgw' : name)['rules'] as Rule[];
    const allows = (rs: Rule[], group: string, resource: string, verb: string) =>
      rs.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb));
    const full = ['create', 'get', 'list', 'watch', 'update', 'patch', 'delete'];
    const used: [string, string, string[]][] = [
      // What src/kube's client calls (informers list and watch; a replica restarts by its pod's deletion).
      ['', 'pods', ['get', 'list', 'watch', 'delete']],
      ['', 'pods/log', ['get']],
      ['', 'events', ['list', 'watch']],
      ['', 'secrets', ['create', 'get', 'update', 'patch', 'list', 'watch', 'delete']],
      ['apps', 'deployments', full],
      ['leaderworkerset.x-k8s.io', 'leaderworkersets', full],
    ];
    for (const [group, resource, verbs] of used)
      for (const verb of verbs)
        expect(allows(rules('Role'), group, resource, verb), `${verb} ${resource}`).toBe(true);
    for (const verb of ['get', 'list', 'watch'])
      expect(allows(rules('ClusterRole'), '', 'nodes', verb)).toBe(true);
    expect(rules('ClusterRole')).toHaveLength(1);
    const granted = rules('Role').flatMap((r) =>
      r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${v} ${g}/${res}`))),
    );
    const needed = used.flatMap(([g, res, verbs]) => verbs.map((v) => `${v} ${g}/${res}`));
    expect(granted.sort()).toEqual(needed.sort());
    expect(one(objs, 'ClusterRoleBinding')['roleRef']).toMatchObject({
      name: one(objs, 'ClusterRole').metadata.name,
    });
    // Its own Secret (src/kube/keys-secret.ts): create (which no name can limit), then get and
    // update of that one Secret only.
    expect(one(objs, 'Role', 'demo-llmgw-keys')['rules']).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['demo-llmgw'], verbs: ['get', 'update'] },
    ]);
    expect(one(objs, 'RoleBinding', 'demo-llmgw-keys')).toMatchObject({
      metadata: { namespace: 'ai' },
      roleRef: { kind: 'Role', name: 'demo-llmgw-keys' },
      subjects: [{ kind: 'ServiceAccount', name: 'demo-llmgw', namespace: 'ai' }],
    });
  });

  it('renders the same bytes each time: nothing drawn or looked up, so GitOps syncs change nothing', () => {
    for (const values of [{}, { replicaCount: 2, database: { type: 'postgresql', existingSecret: 'pg' } }]) {
      const [a, b] = [render(values), render(values)];
      expect(a.ok, a.err).toBe(true);
      expect(b.out).toBe(a.out);
    }
    const templates = join(chartDir, 'templates');
    const files = readdirSync(templates, { recursive: true, encoding: 'utf8' }).filter((f) =>
      /\.(ya?ml|tpl|txt)$/.test(f),
    );
    expect(files).toContain('tests/health.yaml');
    for (const f of files) {
      // The template actions, comments left out: Sprig's random, clock and certificate functions,
      // and lookup (which finds nothing without a cluster).
      const actions = readFileSync(join(templates, f), 'utf8')
        .replace(/\{\{-?\s*\/\*[\s\S]*?\*\/\s*-?\}\}/g, '')
        .match(/\{\{[\s\S]*?\}\}/g);
      for (const a of actions ?? [])
        expect(a, f).not.toMatch(
          /\b(lookup|rand[A-Za-z]*|uuidv4|gen(CA|PrivateKey|SelfSignedCert|SignedCert)|now)\b/,
        );
    }
  });

  it('takes each key from an existing Secret when named, and llmgw keeps the other in its own', () => {
    const objs = objects({ adminKey: { existingSecret: 'sealed-admin', secretKey: 'key' } });
    expect(envOf(objs, 'LLMGW_ADMIN_KEY')?.valueFrom?.secretKeyRef).toEqual({
      name: 'sealed-admin',
      key: 'key',
    });
    expect(envOf(objs, 'LLMGW_ENGINE_KEY_SECRET')).toBeUndefined();
    const s = loadChartSettings(objs) as { kubernetes: { keys_secret: unknown } };
    expect(s.kubernetes.keys_secret).toEqual({ name: 'demo-llmgw', namespace: 'ai' });
    expect(one(objs, 'Role', 'demo-llmgw-keys')).toBeDefined();

    const engineOnly = objects({ engineKeySecret: { existingSecret: 'sealed-engine' } });
    expect(envOf(engineOnly, 'LLMGW_ENGINE_KEY_SECRET')?.valueFrom?.secretKeyRef).toEqual({
      name: 'sealed-engine',
      key: 'engine-key-secret',
    });
    expect(envOf(engineOnly, 'LLMGW_ADMIN_KEY')).toBeUndefined();
  });

  it('has a helm test pod that asks /api/v1/health through the Service, trusting the right CA', () => {
    type TestPod = Obj & {
      metadata: { annotations: Record<string, string> };
      spec: PodSpec & { restartPolicy: string; volumes?: PodSpec['volumes'] };
    };
    const testPod = (values: object) => one(objects(values), 'Pod') as TestPod;
    const env = (p: TestPod) =>
      Object.fromEntries((p.spec.containers[0]?.env ?? []).map((e) => [e.name, e.value]));

    const own = testPod({});
    expect(own.metadata.annotations['helm.sh/hook']).toBe('test');
    expect(own.spec.restartPolicy).toBe('Never');
    expect(own.spec.containers[0]?.securityContext).toMatchObject({ readOnlyRootFilesystem: true });
    // The Service's name is in the serving certificate; llmgw's own CA is the one the server presents.
    expect(env(own)).toEqual({ HEALTH_URL: 'https://demo-llmgw.ai.svc:8080/api/v1/health', OWN_CA: 'true' });
    const script = (own.spec.containers[0]?.['args'] as string[])[0] ?? '';
    expect(() => new Script(script)).not.toThrow();

    const given = testPod({ tls: { existingSecret: 'web-tls' } });
    expect(env(given)).toEqual({
      HEALTH_URL: 'https://demo-llmgw.ai.svc:8080/api/v1/health',
      OWN_CA: 'false',
      CA_FILE: '/etc/llmgw-test/ca.crt',
    });
    expect(given.spec.volumes).toEqual([
      {
        name: 'ca',
        secret: { secretName: 'web-tls', optional: true, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
      },
    ]);

    const plain = testPod({ tls: { enabled: false }, service: { port: 9090 } });
    expect(env(plain)).toEqual({
      HEALTH_URL: 'http://demo-llmgw.ai.svc:9090/api/v1/health',
      OWN_CA: 'false',
    });

    expect(objects({ tests: { enabled: false } }).some((o) => o.kind === 'Pod')).toBe(false);
  });

  it.skipIf(renderer !== 'go')('renders NOTES.txt with how to read the admin key and log in', () => {
    const r = spawnSync(goRenderer(), [...baseGoArgs(), '--name', 'demo', '--namespace', 'ai', '--notes'], {
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const notes = r.stdout.slice(r.stdout.indexOf('\nNOTES:\n'));
    expect(notes).toContain(
      "kubectl -n ai get secret demo-llmgw -o jsonpath='{.data.admin-key}' | base64 -d",
    );
    expect(notes).toContain('llmgw ctl login --server https://localhost:8080 --key <the admin key>');
  });

  it('has every rendered object checked by the fake API server, which refuses a broken one', () => {
    const objs = objects({
      inferencePool: { enabled: true, model: 'm', endpointPicker: { service: 'epp' } },
    });
    const d = structuredClone(deployment(objs));
    (d.spec.template.spec.containers[0] as Container)['livenessProbe'] = {
      tcpSocket: { port: 'Not_A_Port_Name' },
    };
    (d.spec as Record<string, unknown>)['replica'] = 2;
    expect(validateObject(d).map((p) => p.field)).toEqual(
      expect.arrayContaining([
        'spec.replica',
        'spec.template.spec.containers[0].livenessProbe.tcpSocket.port',
      ]),
    );
    const pool = structuredClone(one(objs, 'InferencePool')) as Obj & { spec: Record<string, unknown> };
    pool.spec['targetPorts'] = [];
    expect(validateObject(pool)).not.toEqual([]);
  });

  it('refuses values it cannot run, saying what to set', () => {
    const refused = (values: object, message: string) => {
      const r = render(values);
      expect(r.ok).toBe(false);
      expect(r.err).toContain(message);
    };
    refused(
      { replicaCount: 2, database: { type: 'postgresql' } },
      'database.existingSecret is required with database.type postgresql: the name of a Secret whose key database.secretKey (url) holds postgres://',
    );
    refused(
      { replicaCount: 3 },
      'replicaCount is 3, but the embedded SQLite database serves one control plane: set replicaCount: 1, or database.type: postgresql with database.existingSecret for several',
    );
    refused(
      { inferencePool: { enabled: true, endpointPicker: { service: 'epp' } } },
      'inferencePool.model is required with inferencePool.enabled',
    );
    refused(
      { inferencePool: { enabled: true, model: 'm' } },
      'inferencePool.endpointPicker.service is required with inferencePool.enabled',
    );
    refused(
      { kubernetes: { models: { create: true } } },
      'kubernetes.models.create makes the claim named by kubernetes.models.pvc',
    );
  });

  it('checks values against values.schema.json, as helm does before rendering', () => {
    const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as object;
    const defaults = parseYaml(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as Record<
      string,
      unknown
    >;
    const validate = new Ajv({ allErrors: true }).compile(schema);
    const merged = (over: Record<string, unknown>) => coalesce(structuredClone(defaults), over);
    expect(validate(defaults), JSON.stringify(validate.errors)).toBe(true);
    expect(
      validate(merged({ replicaCount: 2, database: { type: 'postgresql', existingSecret: 'pg' } })),
    ).toBe(true);

    const rejects = (over: Record<string, unknown>, path: string, message: string) => {
      expect(validate(merged(over))).toBe(false);
      expect(validate.errors?.map((e) => `${e.instancePath} ${e.message ?? ''}`)).toContain(
        `${path} ${message}`,
      );
    };
    rejects({ replicaCount: 'two' }, '/replicaCount', 'must be integer');
    rejects({ database: { type: 'mysql' } }, '/database/type', 'must be equal to one of the allowed values');
    rejects({ kubernetes: { enginePort: 70000 } }, '/kubernetes/enginePort', 'must be <= 65535');
    rejects({ replicas: 2 }, '', 'must NOT have additional properties');
    // As a subchart it gets its parent's global values.
    expect(validate(merged({ global: { imageRegistry: 'r.example.com', storageClass: 'fast' } }))).toBe(true);
    rejects({ global: 'x' }, '/global', 'must be object');
    rejects({ tests: { enable: false } }, '/tests', 'must NOT have additional properties');
    // The chart's own keys are set through its values (service.port, database, tls, kubernetes).
    rejects({ settings: { listen: '0.0.0.0:1' } }, '/settings', 'property name must be valid');
    if (renderer === 'helm') {
      const r = render({ replicaCount: 'two' });
      expect(r.ok).toBe(false);
      expect(r.err).toContain('replicaCount');
    }
  });
});

/** Helm's coalescing of a values file over the chart's: maps key by key, null removes a key. */
function coalesce(dst: Record<string, unknown>, src: Record<string, unknown>): Record<string, unknown> {
  const out = { ...dst };
  for (const [k, v] of Object.entries(src)) {
    const d = out[k];
    out[k] = isMap(v) && isMap(d) ? coalesce(d, v) : v;
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== null));
}

const isMap = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
