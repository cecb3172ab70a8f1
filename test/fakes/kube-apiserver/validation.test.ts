import { describe, expect, it } from 'vitest';
import { validateObject } from './index.js';

/** A Deployment as an engine chart renders one, using the PodSpec fields real manifests use. */
const engine = () => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: {
    name: 'llmgw-llama-3-1-8b-h100',
    namespace: 'llmgw',
    labels: {
      'app.kubernetes.io/managed-by': 'llmgw',
      'llmgw.io/model': 'llama-3.1-8b',
      'llmgw.io/profile': 'h100',
    },
    annotations: { 'llmgw.io/spec-hash': 'abc123' },
  },
  spec: {
    replicas: 2,
    strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '25%' } },
    selector: { matchLabels: { 'llmgw.io/model': 'llama-3.1-8b', 'llmgw.io/profile': 'h100' } },
    template: {
      metadata: { labels: { 'llmgw.io/model': 'llama-3.1-8b', 'llmgw.io/profile': 'h100' } },
      spec: {
        runtimeClassName: 'nvidia',
        serviceAccountName: 'llmgw-engine',
        shareProcessNamespace: false,
        hostIPC: true,
        hostNetwork: false,
        dnsPolicy: 'ClusterFirst',
        terminationGracePeriodSeconds: 30,
        nodeSelector: { 'kubernetes.io/os': 'linux' },
        securityContext: { runAsNonRoot: false, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                {
                  matchExpressions: [
                    { key: 'nvidia.com/gpu.product', operator: 'In', values: ['NVIDIA-H100-80GB-HBM3'] },
                    { key: 'nvidia.com/gpu.memory', operator: 'Gt', values: ['80000'] },
                    { key: 'node-role.kubernetes.io/control-plane', operator: 'DoesNotExist' },
                  ],
                },
              ],
            },
          },
        },
        tolerations: [
          { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
          { key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoExecute', tolerationSeconds: 60 },
        ],
        initContainers: [
          {
            name: 'pull',
            image: 'ghcr.io/llmgw/llmgw:0.1.0',
            args: ['model', 'pull', 'llama-3.1-8b'],
            volumeMounts: [{ name: 'models', mountPath: '/models' }],
            resources: { requests: { cpu: '500m', memory: '1Gi' } },
          },
        ],
        containers: [
          {
            name: 'engine',
            image: 'vllm/vllm-openai:v0.11.0',
            imagePullPolicy: 'IfNotPresent',
            command: ['vllm', 'serve'],
            args: ['/models/llama', '--port', '8000'],
            ports: [{ name: 'http', containerPort: 8000, protocol: 'TCP' }],
            env: [
              { name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: 'llmgw-engine-key', key: 'key' } } },
              { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
              { name: 'HF_HUB_OFFLINE', value: '1' },
            ],
            envFrom: [{ configMapRef: { name: 'llmgw-engine-env', optional: true } }],
            resources: {
              requests: { cpu: '4', memory: '32Gi', 'nvidia.com/gpu': '1' },
              limits: { memory: '64Gi', 'nvidia.com/gpu': '1' },
            },
            readinessProbe: {
              httpGet: { path: '/health', port: 'http' },
              periodSeconds: 5,
              failureThreshold: 3,
            },
            livenessProbe: { tcpSocket: { port: 8000 }, initialDelaySeconds: 600 },
            startupProbe: { httpGet: { path: '/health', port: 8000, scheme: 'HTTP' }, failureThreshold: 120 },
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            volumeMounts: [
              { name: 'models', mountPath: '/models', readOnly: true },
              { name: 'shm', mountPath: '/dev/shm' },
              { name: 'key', mountPath: '/etc/llmgw', readOnly: true },
              { name: 'cache', mountPath: '/root/.cache' },
              { name: 'config', mountPath: '/etc/engine' },
            ],
          },
        ],
        volumes: [
          { name: 'models', persistentVolumeClaim: { claimName: 'llmgw-models', readOnly: true } },
          { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '16Gi' } },
          { name: 'key', secret: { secretName: 'llmgw-engine-key', defaultMode: 0o400 } },
          { name: 'cache', hostPath: { path: '/var/cache/llmgw', type: 'DirectoryOrCreate' } },
          {
            name: 'config',
            configMap: { name: 'llmgw-engine-config', items: [{ key: 'a', path: 'a.yaml' }] },
          },
        ],
      },
    },
  },
});

type Engine = ReturnType<typeof engine>;
const containerOf = (d: Engine) => d.spec.template.spec.containers[0] as Record<string, any>;

describe('validateObject', () => {
  it('accepts a full engine Deployment', () => {
    expect(validateObject(engine())).toEqual([]);
  });

  it.each<[string, (d: Engine) => void, string, string]>([
    [
      'an unknown field',
      (d) => (containerOf(d)['imagePullPolcy'] = 'Always'),
      'spec.template.spec.containers[0].imagePullPolcy',
      'unknown field',
    ],
    [
      'a string where an integer goes',
      (d) => ((d.spec as any).replicas = '2'),
      'spec.replicas',
      'cannot unmarshal string into Go struct field Deployment.spec.replicas of type int32',
    ],
    [
      'a container without an image',
      (d) => delete containerOf(d)['image'],
      'spec.template.spec.containers[0].image',
      'Required value',
    ],
    [
      'a selector that misses the template',
      (d) => (d.spec.selector.matchLabels['llmgw.io/profile'] = 'a100'),
      'spec.template.metadata.labels',
      'Invalid value: map[string]string{"llmgw.io/model":"llama-3.1-8b", "llmgw.io/profile":"h100"}: `selector` does not match template `labels`',
    ],
    [
      'a quantity that does not parse',
      (d) => (containerOf(d)['resources'].requests.memory = '32GB'),
      'spec.template.spec.containers[0].resources.requests[memory]',
      `Invalid value: "32GB": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
    ],
    [
      'a GPU request unequal to its limit',
      (d) => (containerOf(d)['resources'].requests['nvidia.com/gpu'] = '2'),
      'spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]',
      'Invalid value: "2": must be equal to nvidia.com/gpu limit of 1',
    ],
    [
      'a port out of range',
      (d) => (containerOf(d)['ports'][0].containerPort = 70000),
      'spec.template.spec.containers[0].ports[0].containerPort',
      'Invalid value: 70000: must be between 1 and 65535, inclusive',
    ],
    [
      'a mount of no volume',
      (d) => (containerOf(d)['volumeMounts'][0].name = 'weights'),
      'spec.template.spec.containers[0].volumeMounts[0].name',
      'Not found: "weights"',
    ],
    [
      'a label value with a slash',
      (d) => (d.metadata.labels['llmgw.io/model'] = 'meta/llama'),
      'metadata.labels',
      `Invalid value: "meta/llama": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
    ],
    [
      'an unknown affinity operator',
      (d) =>
        (d.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]!.matchExpressions[0]!.operator =
          'Equals'),
      'spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator',
      'Unsupported value: "Equals": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
    ],
    [
      'an emptyDir medium that does not exist',
      (d) => ((d.spec.template.spec.volumes[1] as any).emptyDir.medium = 'RAM'),
      'spec.template.spec.volumes[1].emptyDir.medium',
      'Unsupported value: "RAM": supported values: "", "Memory", "HugePages"',
    ],
    [
      'a secret reference without a key',
      (d) => delete containerOf(d)['env'][0].valueFrom.secretKeyRef.key,
      'spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.key',
      'Required value',
    ],
    [
      'a name that is not a DNS-1123 label',
      (d) => (d.metadata.name = 'llmgw-Llama'),
      'metadata.name',
      `Invalid value: "llmgw-Llama": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
    ],
  ])('refuses %s', (_what, change, field, message) => {
    const d = engine();
    change(d);
    expect(validateObject(d)).toEqual([expect.objectContaining({ field, message })]);
  });

  it('checks the other kinds llmgw and its chart create', () => {
    const ok = [
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'k' }, type: 'Opaque', stringData: { key: 'x' } },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'llmgw' },
        spec: { selector: { app: 'llmgw' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
      },
      {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: 'db' },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } },
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'llmgw:nodes' },
        rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'llmgw' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'llmgw' },
        subjects: [{ kind: 'ServiceAccount', name: 'llmgw', namespace: 'llmgw' }],
      },
      {
        apiVersion: 'inference.networking.k8s.io/v1',
        kind: 'InferencePool',
        metadata: { name: 'llama' },
        spec: {
          selector: { matchLabels: { 'llmgw.io/model': 'llama' } },
          targetPorts: [{ number: 8000 }],
          endpointPickerRef: { name: 'epp', port: { number: 9002 } },
        },
      },
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        metadata: { name: 'llmgw' },
        spec: {
          ingressClassName: 'nginx',
          tls: [{ hosts: ['llm.example.com'], secretName: 'tls' }],
          rules: [
            {
              host: 'llm.example.com',
              http: {
                paths: [
                  {
                    path: '/',
                    pathType: 'Prefix',
                    backend: { service: { name: 'llmgw', port: { name: 'http' } } },
                  },
                ],
              },
            },
          ],
        },
      },
      {
        apiVersion: 'policy/v1',
        kind: 'PodDisruptionBudget',
        metadata: { name: 'llmgw' },
        spec: { maxUnavailable: 1, selector: { matchLabels: { app: 'llmgw' } } },
      },
    ];
    for (const o of ok) expect(validateObject(o), o.kind).toEqual([]);
    expect(
      validateObject({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 's' },
        spec: { ports: [{ port: 0 }] },
      }),
    ).toEqual([
      expect.objectContaining({
        field: 'spec.ports[0].port',
        message: 'Invalid value: 0: must be between 1 and 65535, inclusive',
      }),
    ]);
    expect(
      validateObject({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        metadata: { name: 'i' },
        spec: {
          rules: [
            { http: { paths: [{ path: '/', backend: { service: { name: 's', port: { number: 80 } } } }] } },
          ],
        },
      }),
    ).toEqual([
      expect.objectContaining({
        field: 'spec.rules[0].http.paths[0].pathType',
        message: 'Required value: pathType must be specified',
      }),
    ]);
    expect(validateObject({ apiVersion: 'v1', kind: 'Widget', metadata: { name: 'w' } })).toEqual([
      expect.objectContaining({ field: 'kind', message: 'no matches for kind "Widget" in version "v1"' }),
    ]);
    expect(
      validateObject({
        apiVersion: 'inference.networking.k8s.io/v1',
        kind: 'InferencePool',
        metadata: { name: 'p' },
        spec: {
          selector: { matchLabels: { a: 'b' } },
          targetPortNumber: 8000,
          endpointPickerRef: { name: 'epp', port: { number: 9002 } },
        },
      }),
    ).toEqual([
      expect.objectContaining({ field: 'spec.targetPortNumber', message: 'unknown field' }),
      expect.objectContaining({ field: 'spec.targetPorts', message: 'Required value' }),
    ]);
  });
});
