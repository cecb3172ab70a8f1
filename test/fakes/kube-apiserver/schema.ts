/**
 * Structural schemas of the kinds the fake serves (the fields of k8s.io/api v1.33, the LeaderWorkerSet and
 * InferencePool CRDs), and the kinds' validation rules that manifests break most: what fieldValidation=Strict
 * decoding and the real validators refuse. Every field takes null, as Go's decoder does.
 */
import { z } from 'zod';
import { QUANTITY_MESSAGE, parseQuantity } from './quantity.js';
import type { KubeObject } from './registry.js';
import type { ResourceType } from './resources.js';
import { labelSelectorRequirements, matchRequirements } from './selectors.js';
import { kindValidators, type Problem } from './validation.js';

type Shape = Record<string, z.ZodType>;
/** A Go struct: known fields only, each optional and nullable. */
const obj = (shape: Shape) =>
  z.strictObject(Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, v.nullish()])));
const str = z.string();
const int = z.number().int();
const bool = z.boolean();
const intOrString = z.union([int, str]);
const quantity = z.union([str, z.number()]);
const strMap = z.record(str, str);
const arr = (s: z.ZodType) => z.array(s);
const anyObj = z.looseObject({});
const anyValue = z.unknown();

const metadata = obj({
  name: str,
  generateName: str,
  namespace: str,
  labels: strMap,
  annotations: strMap,
  ownerReferences: arr(
    obj({ apiVersion: str, kind: str, name: str, uid: str, controller: bool, blockOwnerDeletion: bool }),
  ),
  finalizers: arr(str),
  uid: str,
  resourceVersion: str,
  generation: int,
  creationTimestamp: str,
  deletionTimestamp: str,
  deletionGracePeriodSeconds: int,
  managedFields: arr(anyObj),
  selfLink: str,
});

const labelSelector = obj({
  matchLabels: strMap,
  matchExpressions: arr(obj({ key: str, operator: str, values: arr(str) })),
});
const localRef = obj({ name: str });
const keySelector = obj({ name: str, key: str, optional: bool });
const fieldRef = obj({ apiVersion: str, fieldPath: str });
const resourceFieldRef = obj({ containerName: str, resource: str, divisor: quantity });
const envVar = obj({
  name: str,
  value: str,
  valueFrom: obj({
    fieldRef,
    resourceFieldRef,
    configMapKeyRef: keySelector,
    secretKeyRef: keySelector,
    fileKeyRef: anyObj,
  }),
});
const envFrom = obj({
  prefix: str,
  configMapRef: obj({ name: str, optional: bool }),
  secretRef: obj({ name: str, optional: bool }),
});
const httpGet = obj({
  path: str,
  port: intOrString,
  host: str,
  scheme: str,
  httpHeaders: arr(obj({ name: str, value: str })),
});
const handler = {
  exec: obj({ command: arr(str) }),
  httpGet,
  tcpSocket: obj({ port: intOrString, host: str }),
  grpc: obj({ port: int, service: str }),
};
const probe = obj({
  ...handler,
  initialDelaySeconds: int,
  timeoutSeconds: int,
  periodSeconds: int,
  successThreshold: int,
  failureThreshold: int,
  terminationGracePeriodSeconds: int,
});
const lifecycleHandler = obj({
  exec: handler.exec,
  httpGet,
  tcpSocket: handler.tcpSocket,
  sleep: obj({ seconds: int }),
});
const seLinuxOptions = obj({ user: str, role: str, type: str, level: str });
const seccompProfile = obj({ type: str, localhostProfile: str });
const appArmorProfile = obj({ type: str, localhostProfile: str });
const windowsOptions = obj({
  gmsaCredentialSpecName: str,
  gmsaCredentialSpec: str,
  runAsUserName: str,
  hostProcess: bool,
});
const containerSecurityContext = obj({
  allowPrivilegeEscalation: bool,
  appArmorProfile,
  capabilities: obj({ add: arr(str), drop: arr(str) }),
  privileged: bool,
  procMount: str,
  readOnlyRootFilesystem: bool,
  runAsGroup: int,
  runAsNonRoot: bool,
  runAsUser: int,
  seLinuxOptions,
  seccompProfile,
  windowsOptions,
});
const resources = obj({
  limits: z.record(str, quantity),
  requests: z.record(str, quantity),
  claims: arr(obj({ name: str, request: str })),
});
const container = obj({
  name: str,
  image: str,
  command: arr(str),
  args: arr(str),
  workingDir: str,
  ports: arr(obj({ name: str, containerPort: int, hostPort: int, hostIP: str, protocol: str })),
  env: arr(envVar),
  envFrom: arr(envFrom),
  resources,
  resizePolicy: arr(obj({ resourceName: str, restartPolicy: str })),
  restartPolicy: str,
  volumeMounts: arr(
    obj({
      name: str,
      mountPath: str,
      subPath: str,
      subPathExpr: str,
      readOnly: bool,
      recursiveReadOnly: str,
      mountPropagation: str,
    }),
  ),
  volumeDevices: arr(obj({ name: str, devicePath: str })),
  livenessProbe: probe,
  readinessProbe: probe,
  startupProbe: probe,
  lifecycle: obj({ postStart: lifecycleHandler, preStop: lifecycleHandler, stopSignal: str }),
  terminationMessagePath: str,
  terminationMessagePolicy: str,
  imagePullPolicy: str,
  securityContext: containerSecurityContext,
  stdin: bool,
  stdinOnce: bool,
  tty: bool,
});
const keyToPath = arr(obj({ key: str, path: str, mode: int }));
const nodeSelectorTerm = obj({
  matchExpressions: arr(obj({ key: str, operator: str, values: arr(str) })),
  matchFields: arr(obj({ key: str, operator: str, values: arr(str) })),
});
const podAffinityTerm = obj({
  labelSelector,
  namespaces: arr(str),
  namespaceSelector: labelSelector,
  topologyKey: str,
  matchLabelKeys: arr(str),
  mismatchLabelKeys: arr(str),
});
const podAffinity = obj({
  requiredDuringSchedulingIgnoredDuringExecution: arr(podAffinityTerm),
  preferredDuringSchedulingIgnoredDuringExecution: arr(obj({ weight: int, podAffinityTerm })),
});
const volume = obj({
  name: str,
  persistentVolumeClaim: obj({ claimName: str, readOnly: bool }),
  emptyDir: obj({ medium: str, sizeLimit: quantity }),
  secret: obj({ secretName: str, items: keyToPath, defaultMode: int, optional: bool }),
  configMap: obj({ name: str, items: keyToPath, defaultMode: int, optional: bool }),
  hostPath: obj({ path: str, type: str }),
  projected: obj({ sources: arr(anyObj), defaultMode: int }),
  downwardAPI: obj({ items: arr(anyObj), defaultMode: int }),
  csi: obj({
    driver: str,
    readOnly: bool,
    fsType: str,
    volumeAttributes: strMap,
    nodePublishSecretRef: localRef,
  }),
  ephemeral: obj({ volumeClaimTemplate: obj({ metadata, spec: anyObj }) }),
  nfs: obj({ server: str, path: str, readOnly: bool }),
  image: obj({ reference: str, pullPolicy: str }),
  // Legacy in-tree sources: accepted as they come.
  ...Object.fromEntries(
    [
      'awsElasticBlockStore',
      'azureDisk',
      'azureFile',
      'cephfs',
      'cinder',
      'fc',
      'flexVolume',
      'flocker',
      'gcePersistentDisk',
      'gitRepo',
      'glusterfs',
      'iscsi',
      'photonPersistentDisk',
      'portworxVolume',
      'quobyte',
      'rbd',
      'scaleIO',
      'storageos',
      'vsphereVolume',
    ].map((k) => [k, anyObj]),
  ),
});
const podSpec = obj({
  activeDeadlineSeconds: int,
  affinity: obj({
    nodeAffinity: obj({
      requiredDuringSchedulingIgnoredDuringExecution: obj({ nodeSelectorTerms: arr(nodeSelectorTerm) }),
      preferredDuringSchedulingIgnoredDuringExecution: arr(
        obj({ weight: int, preference: nodeSelectorTerm }),
      ),
    }),
    podAffinity,
    podAntiAffinity: podAffinity,
  }),
  automountServiceAccountToken: bool,
  containers: arr(container),
  dnsConfig: obj({ nameservers: arr(str), searches: arr(str), options: arr(obj({ name: str, value: str })) }),
  dnsPolicy: str,
  enableServiceLinks: bool,
  ephemeralContainers: arr(anyObj),
  hostAliases: arr(obj({ ip: str, hostnames: arr(str) })),
  hostIPC: bool,
  hostNetwork: bool,
  hostPID: bool,
  hostUsers: bool,
  hostname: str,
  imagePullSecrets: arr(localRef),
  initContainers: arr(container),
  nodeName: str,
  nodeSelector: strMap,
  os: obj({ name: str }),
  overhead: z.record(str, quantity),
  preemptionPolicy: str,
  priority: int,
  priorityClassName: str,
  readinessGates: arr(obj({ conditionType: str })),
  resourceClaims: arr(anyObj),
  resources,
  restartPolicy: str,
  runtimeClassName: str,
  schedulerName: str,
  schedulingGates: arr(obj({ name: str })),
  securityContext: obj({
    appArmorProfile,
    fsGroup: int,
    fsGroupChangePolicy: str,
    runAsGroup: int,
    runAsNonRoot: bool,
    runAsUser: int,
    seLinuxChangePolicy: str,
    seLinuxOptions,
    seccompProfile,
    supplementalGroups: arr(int),
    supplementalGroupsPolicy: str,
    sysctls: arr(obj({ name: str, value: str })),
    windowsOptions,
  }),
  serviceAccount: str,
  serviceAccountName: str,
  setHostnameAsFQDN: bool,
  shareProcessNamespace: bool,
  subdomain: str,
  terminationGracePeriodSeconds: int,
  tolerations: arr(obj({ key: str, operator: str, value: str, effect: str, tolerationSeconds: int })),
  topologySpreadConstraints: arr(
    obj({
      maxSkew: int,
      topologyKey: str,
      whenUnsatisfiable: str,
      labelSelector,
      minDomains: int,
      nodeAffinityPolicy: str,
      nodeTaintsPolicy: str,
      matchLabelKeys: arr(str),
    }),
  ),
  volumes: arr(volume),
});
const podTemplate = obj({ metadata, spec: podSpec });
const pvcSpec = obj({
  accessModes: arr(str),
  resources: obj({ limits: z.record(str, quantity), requests: z.record(str, quantity) }),
  storageClassName: str,
  volumeMode: str,
  volumeName: str,
  selector: labelSelector,
  dataSource: obj({ apiGroup: str, kind: str, name: str }),
  dataSourceRef: obj({ apiGroup: str, kind: str, name: str, namespace: str }),
  volumeAttributesClassName: str,
});
const policyRule = obj({
  apiGroups: arr(str),
  resources: arr(str),
  verbs: arr(str),
  resourceNames: arr(str),
  nonResourceURLs: arr(str),
});
const roleRef = obj({ apiGroup: str, kind: str, name: str });
const subjects = arr(obj({ kind: str, apiGroup: str, name: str, namespace: str }));

const ingressBackend = obj({
  service: obj({ name: str, port: obj({ name: str, number: int }) }),
  resource: obj({ apiGroup: str, kind: str, name: str }),
});

const top = (fields: Shape) => obj({ apiVersion: str, kind: str, metadata, status: anyValue, ...fields });

const SCHEMAS: Record<string, z.ZodType> = {
  Namespace: top({ spec: obj({ finalizers: arr(str) }) }),
  Node: top({
    spec: obj({
      podCIDR: str,
      podCIDRs: arr(str),
      providerID: str,
      unschedulable: bool,
      taints: arr(obj({ key: str, value: str, effect: str, timeAdded: str })),
      configSource: anyObj,
      externalID: str,
    }),
  }),
  Pod: top({ spec: podSpec }),
  Secret: top({ data: strMap, stringData: strMap, type: str, immutable: bool }),
  ConfigMap: top({ data: strMap, binaryData: strMap, immutable: bool }),
  Service: top({
    spec: obj({
      ports: arr(
        obj({
          name: str,
          protocol: str,
          appProtocol: str,
          port: int,
          targetPort: intOrString,
          nodePort: int,
        }),
      ),
      selector: strMap,
      type: str,
      clusterIP: str,
      clusterIPs: arr(str),
      externalIPs: arr(str),
      sessionAffinity: str,
      sessionAffinityConfig: anyObj,
      loadBalancerIP: str,
      loadBalancerSourceRanges: arr(str),
      loadBalancerClass: str,
      externalName: str,
      externalTrafficPolicy: str,
      internalTrafficPolicy: str,
      healthCheckNodePort: int,
      publishNotReadyAddresses: bool,
      ipFamilies: arr(str),
      ipFamilyPolicy: str,
      allocateLoadBalancerNodePorts: bool,
      trafficDistribution: str,
    }),
  }),
  ServiceAccount: top({
    secrets: arr(anyObj),
    imagePullSecrets: arr(localRef),
    automountServiceAccountToken: bool,
  }),
  PersistentVolumeClaim: top({ spec: pvcSpec }),
  Event: top({
    involvedObject: obj({
      kind: str,
      namespace: str,
      name: str,
      uid: str,
      apiVersion: str,
      resourceVersion: str,
      fieldPath: str,
    }),
    reason: str,
    message: str,
    source: obj({ component: str, host: str }),
    firstTimestamp: str,
    lastTimestamp: str,
    count: int,
    type: str,
    eventTime: str,
    series: anyObj,
    action: str,
    related: anyObj,
    reportingComponent: str,
    reportingInstance: str,
  }),
  Deployment: top({
    spec: obj({
      replicas: int,
      selector: labelSelector,
      template: podTemplate,
      strategy: obj({
        type: str,
        rollingUpdate: obj({ maxSurge: intOrString, maxUnavailable: intOrString }),
      }),
      minReadySeconds: int,
      revisionHistoryLimit: int,
      paused: bool,
      progressDeadlineSeconds: int,
    }),
  }),
  ReplicaSet: top({
    spec: obj({ replicas: int, selector: labelSelector, template: podTemplate, minReadySeconds: int }),
  }),
  StatefulSet: top({
    spec: obj({
      replicas: int,
      selector: labelSelector,
      template: podTemplate,
      serviceName: str,
      volumeClaimTemplates: arr(
        obj({ apiVersion: str, kind: str, metadata, spec: pvcSpec, status: anyValue }),
      ),
      podManagementPolicy: str,
      updateStrategy: obj({ type: str, rollingUpdate: obj({ partition: int, maxUnavailable: intOrString }) }),
      revisionHistoryLimit: int,
      minReadySeconds: int,
      persistentVolumeClaimRetentionPolicy: obj({ whenDeleted: str, whenScaled: str }),
      ordinals: obj({ start: int }),
    }),
  }),
  Ingress: top({
    spec: obj({
      ingressClassName: str,
      defaultBackend: ingressBackend,
      tls: arr(obj({ hosts: arr(str), secretName: str })),
      rules: arr(
        obj({
          host: str,
          http: obj({ paths: arr(obj({ path: str, pathType: str, backend: ingressBackend })) }),
        }),
      ),
    }),
  }),
  PodDisruptionBudget: top({
    spec: obj({
      minAvailable: intOrString,
      maxUnavailable: intOrString,
      selector: labelSelector,
      unhealthyPodEvictionPolicy: str,
    }),
  }),
  Role: top({ rules: arr(policyRule) }),
  ClusterRole: top({
    rules: arr(policyRule),
    aggregationRule: obj({ clusterRoleSelectors: arr(labelSelector) }),
  }),
  RoleBinding: top({ roleRef, subjects }),
  ClusterRoleBinding: top({ roleRef, subjects }),
  LeaderWorkerSet: top({
    spec: obj({
      replicas: int,
      leaderWorkerTemplate: obj({
        leaderTemplate: podTemplate,
        workerTemplate: podTemplate,
        size: int,
        restartPolicy: str,
        subGroupPolicy: anyObj,
        volumeClaimTemplates: arr(anyObj),
      }),
      rolloutStrategy: obj({
        type: str,
        rollingUpdateConfiguration: obj({
          maxUnavailable: intOrString,
          maxSurge: intOrString,
          partition: int,
        }),
      }),
      startupPolicy: str,
      networkConfig: obj({ subdomainPolicy: str }),
    }),
  }),
  InferencePool: top({
    spec: obj({
      selector: obj({ matchLabels: strMap }),
      targetPorts: arr(obj({ number: int })),
      endpointPickerRef: obj({
        group: str,
        kind: str,
        name: str,
        port: obj({ number: int }),
        failureMode: str,
      }),
    }),
  }),
};

/** A zod path as the API server writes field paths: spec.containers[0].name. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out;
}

const GO_TYPES: Record<string, string> = {
  number: 'int32',
  string: 'string',
  boolean: 'bool',
  object: 'object',
  array: 'array',
};

function decodingProblems(rt: ResourceType, o: KubeObject): Problem[] {
  const schema = SCHEMAS[rt.kind];
  if (!schema) return [];
  const r = schema.safeParse(o, { reportInput: true });
  if (r.success) return [];
  const out: Problem[] = [];
  for (const issue of r.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) {
        out.push({
          field: fieldPath([...issue.path, k]),
          message: 'unknown field',
          decoding: true,
          path: [...issue.path, k],
        });
      }
    } else if (issue.code === 'invalid_type') {
      const got = (issue as { input?: unknown }).input;
      const kind = Array.isArray(got) ? 'array' : typeof got;
      out.push({
        field: fieldPath(issue.path),
        message: `cannot unmarshal ${kind} into Go struct field ${rt.kind}.${fieldPath(issue.path)} of type ${GO_TYPES[issue.expected] ?? issue.expected}`,
        decoding: true,
      });
    } else {
      out.push({ field: fieldPath(issue.path), message: issue.message, decoding: true });
    }
  }
  return out;
}

// --- The validators' rules ------------------------------------------------------------------------

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const PORT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const required = (field: string): Problem => ({ field, message: 'Required value' });
const invalidValue = (field: string, value: unknown, why: string): Problem => ({
  field,
  message: `Invalid value: ${typeof value === 'string' ? `"${value}"` : JSON.stringify(value)}: ${why}`,
});
const unsupported = (field: string, value: unknown, allowed: string[]): Problem => ({
  field,
  message: `Unsupported value: "${String(value)}": supported values: ${allowed.map((a) => `"${a}"`).join(', ')}`,
});
const dnsLabelWhy =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

function labelProblems(field: string, labels: Record<string, string> | undefined | null): Problem[] {
  const out: Problem[] = [];
  for (const [k, v] of Object.entries(labels ?? {})) {
    const [prefix, name] = k.includes('/')
      ? [k.slice(0, k.indexOf('/')), k.slice(k.indexOf('/') + 1)]
      : ['', k];
    if (
      name.length > 63 ||
      !QUALIFIED_NAME.test(name) ||
      (prefix !== '' && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    ) {
      out.push(
        invalidValue(
          field,
          k,
          "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
      );
    }
    if (typeof v === 'string' && (v.length > 63 || !LABEL_VALUE.test(v))) {
      out.push(
        invalidValue(
          field,
          v,
          v.length > 63
            ? 'must be no more than 63 characters'
            : "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
      );
    }
  }
  return out;
}

function metaProblems(field: string, meta: any): Problem[] {
  if (!meta) return [];
  const out = [...labelProblems(`${field}.labels`, meta.labels)];
  for (const k of Object.keys(meta.annotations ?? {})) {
    const name = k.includes('/') ? k.slice(k.indexOf('/') + 1) : k;
    if (!QUALIFIED_NAME.test(name) || name.length > 63)
      out.push(invalidValue(`${field}.annotations`, k, 'name part must consist of alphanumeric characters'));
  }
  return out;
}

const STANDARD_RESOURCES = new Set(['cpu', 'memory', 'ephemeral-storage', 'storage']);

function resourceProblems(field: string, res: any): Problem[] {
  const out: Problem[] = [];
  const limits: Record<string, unknown> = res?.limits ?? {};
  const requests: Record<string, unknown> = res?.requests ?? {};
  for (const [kind, list] of [
    ['limits', limits],
    ['requests', requests],
  ] as const) {
    for (const [name, q] of Object.entries(list)) {
      const f = `${field}.${kind}[${name}]`;
      const v = parseQuantity(q);
      if (v === undefined) {
        out.push(invalidValue(f, q, QUANTITY_MESSAGE));
        continue;
      }
      if (v < 0) out.push(invalidValue(f, q, 'must be greater than or equal to 0'));
      const extended = !STANDARD_RESOURCES.has(name) && !name.startsWith('hugepages-') && name.includes('/');
      if (extended && !Number.isInteger(v)) out.push(invalidValue(f, q, 'must be an integer'));
    }
  }
  for (const [name, q] of Object.entries(requests)) {
    const req = parseQuantity(q);
    const lim = parseQuantity(limits[name]);
    if (req === undefined || lim === undefined || limits[name] === undefined) {
      const extended = !STANDARD_RESOURCES.has(name) && !name.startsWith('hugepages-') && name.includes('/');
      if (extended && req !== undefined)
        out.push(invalidValue(`${field}.limits`, name, 'Limit must be set for non overcommitable resources'));
      continue;
    }
    const extended = !STANDARD_RESOURCES.has(name) && name.includes('/');
    if (extended && req !== lim)
      out.push(
        invalidValue(
          `${field}.requests[${name}]`,
          q,
          `must be equal to ${name} limit of ${limits[name] as string | number}`,
        ),
      );
    else if (req > lim)
      out.push(
        invalidValue(
          `${field}.requests`,
          q,
          `must be less than or equal to ${name} limit of ${limits[name] as string | number}`,
        ),
      );
  }
  return out;
}

function probeProblems(field: string, p: any, ports: any[]): Problem[] {
  if (!p) return [];
  const handlers = ['exec', 'httpGet', 'tcpSocket', 'grpc'].filter((h) => p[h]);
  if (handlers.length === 0) return [{ field, message: 'Required value: must specify a handler type' }];
  if (handlers.length > 1) return [{ field, message: `Forbidden: may not specify more than 1 handler type` }];
  const out: Problem[] = [];
  for (const h of ['httpGet', 'tcpSocket'] as const) {
    const port = p[h]?.port;
    if (port === undefined) {
      if (p[h]) out.push(required(`${field}.${h}.port`));
      continue;
    }
    if (typeof port === 'number' && (port < 1 || port > 65535))
      out.push(invalidValue(`${field}.${h}.port`, port, 'must be between 1 and 65535, inclusive'));
    if (typeof port === 'string' && !ports.some((x) => x.name === port)) {
      if (!PORT_NAME.test(port) || port.length > 15)
        out.push(
          invalidValue(
            `${field}.${h}.port`,
            port,
            'must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
          ),
        );
    }
  }
  for (const k of [
    'periodSeconds',
    'timeoutSeconds',
    'successThreshold',
    'failureThreshold',
    'initialDelaySeconds',
  ]) {
    if (typeof p[k] === 'number' && p[k] < 0)
      out.push(invalidValue(`${field}.${k}`, p[k], 'must be greater than or equal to 0'));
  }
  return out;
}

function containerProblems(
  field: string,
  cs: any[] | undefined,
  volumes: Set<string>,
  init: boolean,
): Problem[] {
  const out: Problem[] = [];
  const names = new Set<string>();
  (cs ?? []).forEach((c, i) => {
    const f = `${field}[${i}]`;
    if (!c.name) out.push(required(`${f}.name`));
    else if (!DNS_LABEL.test(c.name) || c.name.length > 63)
      out.push(invalidValue(`${f}.name`, c.name, dnsLabelWhy));
    else if (names.has(c.name))
      out.push({ field: `${f}.name`, message: `Duplicate value: "${String(c.name)}"` });
    names.add(c.name);
    if (!c.image || !String(c.image).trim()) out.push(required(`${f}.image`));
    if (c.imagePullPolicy && !['Always', 'IfNotPresent', 'Never'].includes(c.imagePullPolicy)) {
      out.push(unsupported(`${f}.imagePullPolicy`, c.imagePullPolicy, ['Always', 'IfNotPresent', 'Never']));
    }
    if (
      c.terminationMessagePolicy &&
      !['File', 'FallbackToLogsOnError'].includes(c.terminationMessagePolicy)
    ) {
      out.push(
        unsupported(`${f}.terminationMessagePolicy`, c.terminationMessagePolicy, [
          'File',
          'FallbackToLogsOnError',
        ]),
      );
    }
    const portNames = new Set<string>();
    ((c.ports ?? []) as any[]).forEach((p, j) => {
      const pf = `${f}.ports[${j}]`;
      if (p.containerPort === undefined || p.containerPort === null)
        out.push(required(`${pf}.containerPort`));
      else if (p.containerPort < 1 || p.containerPort > 65535)
        out.push(
          invalidValue(`${pf}.containerPort`, p.containerPort, 'must be between 1 and 65535, inclusive'),
        );
      if (p.hostPort !== undefined && p.hostPort !== null && (p.hostPort < 1 || p.hostPort > 65535)) {
        out.push(invalidValue(`${pf}.hostPort`, p.hostPort, 'must be between 1 and 65535, inclusive'));
      }
      if (p.name) {
        if (p.name.length > 15 || !PORT_NAME.test(p.name) || !/[a-z]/.test(p.name)) {
          out.push(
            invalidValue(
              `${pf}.name`,
              p.name,
              p.name.length > 15
                ? 'must be no more than 15 characters'
                : 'must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
            ),
          );
        } else if (portNames.has(p.name))
          out.push({ field: `${pf}.name`, message: `Duplicate value: "${String(p.name)}"` });
        portNames.add(p.name);
      }
      if (p.protocol && !['TCP', 'UDP', 'SCTP'].includes(p.protocol))
        out.push(unsupported(`${pf}.protocol`, p.protocol, ['SCTP', 'TCP', 'UDP']));
    });
    ((c.env ?? []) as any[]).forEach((e, j) => {
      const ef = `${f}.env[${j}]`;
      if (!e.name) out.push(required(`${ef}.name`));
      else if (!ENV_NAME.test(e.name)) {
        out.push(
          invalidValue(
            `${ef}.name`,
            e.name,
            "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
          ),
        );
      }
      const vf = e.valueFrom;
      if (vf) {
        const sources = [
          'fieldRef',
          'resourceFieldRef',
          'configMapKeyRef',
          'secretKeyRef',
          'fileKeyRef',
        ].filter((k) => vf[k]);
        if (sources.length !== 1)
          out.push({
            field: `${ef}.valueFrom`,
            message: 'Invalid value: "": may not have more than one field specified at a time',
          });
        if (e.value)
          out.push({
            field: `${ef}.valueFrom`,
            message: 'Invalid value: "": may not be specified when `value` is not empty',
          });
        for (const k of ['secretKeyRef', 'configMapKeyRef']) {
          if (vf[k] && !vf[k].key) out.push(required(`${ef}.valueFrom.${k}.key`));
          if (vf[k] && !vf[k].name) out.push(required(`${ef}.valueFrom.${k}.name`));
        }
      }
    });
    out.push(...resourceProblems(`${f}.resources`, c.resources));
    ((c.volumeMounts ?? []) as any[]).forEach((m, j) => {
      const mf = `${f}.volumeMounts[${j}]`;
      if (!m.name) out.push(required(`${mf}.name`));
      else if (!volumes.has(m.name))
        out.push({ field: `${mf}.name`, message: `Not found: "${String(m.name)}"` });
      if (!m.mountPath) out.push(required(`${mf}.mountPath`));
    });
    out.push(...probeProblems(`${f}.readinessProbe`, c.readinessProbe, c.ports ?? []));
    out.push(...probeProblems(`${f}.livenessProbe`, c.livenessProbe, c.ports ?? []));
    out.push(...probeProblems(`${f}.startupProbe`, c.startupProbe, c.ports ?? []));
    if (!init && c.restartPolicy)
      out.push({ field: `${f}.restartPolicy`, message: 'Forbidden: may not be set for non-init containers' });
  });
  return out;
}

const TOLERATION_OPS = ['Equal', 'Exists'];
const SELECTOR_OPS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'];

function podSpecProblems(field: string, spec: any, opts: { template?: boolean } = {}): Problem[] {
  if (!spec) return [required(field)];
  const out: Problem[] = [];
  const volumes = new Set<string>();
  ((spec.volumes ?? []) as any[]).forEach((v, i) => {
    const f = `${field}.volumes[${i}]`;
    if (!v.name) out.push(required(`${f}.name`));
    else if (!DNS_LABEL.test(v.name) || v.name.length > 63)
      out.push(invalidValue(`${f}.name`, v.name, dnsLabelWhy));
    else if (volumes.has(v.name))
      out.push({ field: `${f}.name`, message: `Duplicate value: "${String(v.name)}"` });
    volumes.add(v.name);
    const sources = Object.keys(v).filter((k) => k !== 'name' && v[k] !== null && v[k] !== undefined);
    if (sources.length === 0) out.push({ field: f, message: 'Required value: must specify a volume type' });
    if (sources.length > 1)
      out.push({
        field: `${f}.${sources[1]!}`,
        message: 'Forbidden: may not specify more than 1 volume type',
      });
    if (v.persistentVolumeClaim && !v.persistentVolumeClaim.claimName)
      out.push(required(`${f}.persistentVolumeClaim.claimName`));
    if (v.secret && !v.secret.secretName) out.push(required(`${f}.secret.secretName`));
    if (v.hostPath && !v.hostPath.path) out.push(required(`${f}.hostPath.path`));
    if (
      v.emptyDir?.medium &&
      !['Memory', 'HugePages'].includes(v.emptyDir.medium) &&
      !String(v.emptyDir.medium).startsWith('HugePages-')
    ) {
      out.push(unsupported(`${f}.emptyDir.medium`, v.emptyDir.medium, ['', 'Memory', 'HugePages']));
    }
    if (
      v.emptyDir?.sizeLimit !== undefined &&
      v.emptyDir.sizeLimit !== null &&
      parseQuantity(v.emptyDir.sizeLimit) === undefined
    ) {
      out.push(invalidValue(`${f}.emptyDir.sizeLimit`, v.emptyDir.sizeLimit, QUANTITY_MESSAGE));
    }
  });
  if (!Array.isArray(spec.containers) || spec.containers.length === 0)
    out.push(required(`${field}.containers`));
  out.push(...containerProblems(`${field}.containers`, spec.containers, volumes, false));
  out.push(...containerProblems(`${field}.initContainers`, spec.initContainers, volumes, true));
  const restart = ['Always', 'OnFailure', 'Never'];
  if (spec.restartPolicy && !restart.includes(spec.restartPolicy))
    out.push(unsupported(`${field}.restartPolicy`, spec.restartPolicy, restart));
  if (opts.template && spec.restartPolicy && spec.restartPolicy !== 'Always')
    out.push(unsupported(`${field}.restartPolicy`, spec.restartPolicy, ['Always']));
  const dns = ['ClusterFirstWithHostNet', 'ClusterFirst', 'Default', 'None'];
  if (spec.dnsPolicy && !dns.includes(spec.dnsPolicy))
    out.push(unsupported(`${field}.dnsPolicy`, spec.dnsPolicy, dns));
  if (typeof spec.terminationGracePeriodSeconds === 'number' && spec.terminationGracePeriodSeconds < 0) {
    out.push(
      invalidValue(
        `${field}.terminationGracePeriodSeconds`,
        spec.terminationGracePeriodSeconds,
        'must be greater than or equal to 0',
      ),
    );
  }
  if (spec.serviceAccountName && !DNS_SUBDOMAIN.test(spec.serviceAccountName)) {
    out.push(
      invalidValue(
        `${field}.serviceAccountName`,
        spec.serviceAccountName,
        'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters',
      ),
    );
  }
  if (spec.runtimeClassName && !DNS_SUBDOMAIN.test(spec.runtimeClassName)) {
    out.push(
      invalidValue(
        `${field}.runtimeClassName`,
        spec.runtimeClassName,
        'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters',
      ),
    );
  }
  out.push(...labelProblems(`${field}.nodeSelector`, spec.nodeSelector));
  ((spec.tolerations ?? []) as any[]).forEach((t, i) => {
    const f = `${field}.tolerations[${i}]`;
    if (t.operator && !TOLERATION_OPS.includes(t.operator))
      out.push(unsupported(`${f}.operator`, t.operator, TOLERATION_OPS));
    if (t.operator === 'Exists' && t.value)
      out.push(invalidValue(`${f}.operator`, t.value, "value must be empty when `operator` is 'Exists'"));
    if (!t.key && t.operator !== 'Exists')
      out.push(
        invalidValue(
          `${f}.operator`,
          t.operator ?? '',
          'operator must be Exists when `key` is empty, which means "match all values and all keys"',
        ),
      );
    if (t.effect && !['NoSchedule', 'PreferNoSchedule', 'NoExecute'].includes(t.effect)) {
      out.push(unsupported(`${f}.effect`, t.effect, ['NoExecute', 'NoSchedule', 'PreferNoSchedule']));
    }
  });
  const terms =
    spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  const naf = `${field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`;
  if (
    spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution &&
    (!terms || terms.length === 0)
  ) {
    out.push({ field: naf, message: 'Required value: must have at least one node selector term' });
  }
  ((terms ?? []) as any[]).forEach((t, i) => {
    ((t.matchExpressions ?? []) as any[]).forEach((e, j) => {
      const f = `${naf}[${i}].matchExpressions[${j}]`;
      if (!SELECTOR_OPS.includes(e.operator))
        out.push(unsupported(`${f}.operator`, e.operator, SELECTOR_OPS));
      const n = (e.values ?? []).length;
      if ((e.operator === 'In' || e.operator === 'NotIn') && n === 0) {
        out.push({
          field: `${f}.values`,
          message: "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        });
      }
      if ((e.operator === 'Exists' || e.operator === 'DoesNotExist') && n > 0) {
        out.push({
          field: `${f}.values`,
          message: "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        });
      }
      if ((e.operator === 'Gt' || e.operator === 'Lt') && (n !== 1 || !/^-?\d+$/.test(String(e.values[0])))) {
        out.push({
          field: `${f}.values`,
          message: "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        });
      }
    });
  });
  return out;
}

function templateProblems(field: string, spec: any): Problem[] {
  const out: Problem[] = [];
  if (!spec.selector) out.push(required(`${field}.selector`));
  else if (
    Object.keys(spec.selector.matchLabels ?? {}).length === 0 &&
    (spec.selector.matchExpressions ?? []).length === 0
  ) {
    out.push({
      field: `${field}.selector`,
      message: 'Invalid value: "null": empty selector is invalid for deployment',
    });
  }
  if (!spec.template) return [...out, required(`${field}.template`)];
  const labels = spec.template.metadata?.labels;
  if (spec.selector && !matchRequirements(labelSelectorRequirements(spec.selector), labels)) {
    out.push({
      field: `${field}.template.metadata.labels`,
      message: `Invalid value: ${goMap(labels)}: \`selector\` does not match template \`labels\``,
    });
  }
  if (typeof spec.replicas === 'number' && spec.replicas < 0)
    out.push(invalidValue(`${field}.replicas`, spec.replicas, 'must be greater than or equal to 0'));
  out.push(...metaProblems(`${field}.template.metadata`, spec.template.metadata));
  out.push(...podSpecProblems(`${field}.template.spec`, spec.template.spec, { template: true }));
  return out;
}

const goMap = (m: Record<string, string> | undefined) =>
  `map[string]string{${Object.entries(m ?? {})
    .map(([k, v]) => `"${k}":"${v}"`)
    .join(', ')}}`;

function kindProblems(rt: ResourceType, o: any): Problem[] {
  const out = metaProblems('metadata', o.metadata);
  const spec = o.spec;
  switch (rt.kind) {
    case 'Pod':
      out.push(...podSpecProblems('spec', spec));
      break;
    case 'Deployment':
    case 'ReplicaSet':
    case 'StatefulSet':
      if (!spec) return [...out, required('spec')];
      out.push(...templateProblems('spec', spec));
      if (
        rt.kind === 'Deployment' &&
        spec.strategy?.type &&
        !['RollingUpdate', 'Recreate'].includes(spec.strategy.type)
      ) {
        out.push(unsupported('spec.strategy.type', spec.strategy.type, ['Recreate', 'RollingUpdate']));
      }
      break;
    case 'Secret':
    case 'ConfigMap':
      for (const k of [
        ...Object.keys(o.data ?? {}),
        ...Object.keys(o.stringData ?? {}),
        ...Object.keys(o.binaryData ?? {}),
      ]) {
        if (!SECRET_KEY.test(k)) {
          out.push(
            invalidValue(
              `data[${k}]`,
              k,
              "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            ),
          );
        }
      }
      if (rt.kind === 'Secret') {
        for (const [k, v] of Object.entries((o.data ?? {}) as Record<string, string>)) {
          if (typeof v === 'string' && !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) {
            out.push({ field: `data[${k}]`, message: 'illegal base64 data', decoding: true });
          }
        }
      }
      break;
    case 'Service':
      ((spec?.ports ?? []) as any[]).forEach((p, i) => {
        if (p.port === undefined || p.port === null) out.push(required(`spec.ports[${i}].port`));
        else if (p.port < 1 || p.port > 65535)
          out.push(invalidValue(`spec.ports[${i}].port`, p.port, 'must be between 1 and 65535, inclusive'));
        if ((spec.ports.length > 1 || p.name) && p.name !== undefined && !DNS_LABEL.test(p.name))
          out.push(invalidValue(`spec.ports[${i}].name`, p.name, dnsLabelWhy));
        if (spec.ports.length > 1 && !p.name) out.push(required(`spec.ports[${i}].name`));
      });
      if (spec?.type && !['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'].includes(spec.type)) {
        out.push(
          unsupported('spec.type', spec.type, ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort']),
        );
      }
      out.push(...labelProblems('spec.selector', spec?.selector));
      break;
    case 'PersistentVolumeClaim':
      if (!spec?.accessModes?.length) out.push(required('spec.accessModes'));
      if (!spec?.resources?.requests?.storage) out.push(required('spec.resources[storage]'));
      out.push(...resourceProblems('spec.resources', spec?.resources));
      break;
    case 'Ingress': {
      const backend = (f: string, b: any) => {
        if (!b) return;
        if (b.service && b.resource)
          out.push({ field: f, message: 'Invalid value: "": cannot set both service and resource backends' });
        if (b.service) {
          if (!b.service.name) out.push(required(`${f}.service.name`));
          const p = b.service.port;
          if (!p || (p.name === undefined && p.number === undefined)) out.push(required(`${f}.service.port`));
          else if (p.name !== undefined && p.number !== undefined)
            out.push({
              field: `${f}.service.port`,
              message: 'Invalid value: "": cannot set both port name & port number',
            });
          else if (typeof p.number === 'number' && (p.number < 1 || p.number > 65535))
            out.push(
              invalidValue(`${f}.service.port.number`, p.number, 'must be between 1 and 65535, inclusive'),
            );
        } else if (!b.resource)
          out.push({ field: f, message: 'Invalid value: "": resource or service backend is required' });
      };
      backend('spec.defaultBackend', spec?.defaultBackend);
      if (!spec?.defaultBackend && !(spec?.rules ?? []).length)
        out.push({
          field: 'spec',
          message: 'Invalid value: "": either `defaultBackend` or `rules` must be specified',
        });
      ((spec?.rules ?? []) as any[]).forEach((r, i) => {
        ((r.http?.paths ?? []) as any[]).forEach((p, j) => {
          const f = `spec.rules[${i}].http.paths[${j}]`;
          const types = ['Exact', 'Prefix', 'ImplementationSpecific'];
          if (!p.pathType)
            out.push({ field: `${f}.pathType`, message: 'Required value: pathType must be specified' });
          else if (!types.includes(p.pathType)) out.push(unsupported(`${f}.pathType`, p.pathType, types));
          if (
            p.pathType !== 'ImplementationSpecific' &&
            p.path !== undefined &&
            !String(p.path).startsWith('/')
          ) {
            out.push(invalidValue(`${f}.path`, p.path, 'must be an absolute path'));
          }
          if (!p.backend) out.push(required(`${f}.backend`));
          backend(`${f}.backend`, p.backend);
        });
      });
      break;
    }
    case 'PodDisruptionBudget':
      if (
        spec?.minAvailable !== undefined &&
        spec?.minAvailable !== null &&
        spec?.maxUnavailable !== undefined &&
        spec?.maxUnavailable !== null
      ) {
        out.push({
          field: 'spec',
          message: `Invalid value: ${JSON.stringify(spec)}: minAvailable and maxUnavailable cannot be both set`,
        });
      }
      break;
    case 'Role':
    case 'ClusterRole':
      ((o.rules ?? []) as any[]).forEach((r, i) => {
        if (!r.verbs?.length) out.push(required(`rules[${i}].verbs`));
        if (!r.nonResourceURLs?.length && !r.resources?.length) out.push(required(`rules[${i}].resources`));
        if (!r.nonResourceURLs?.length && !r.apiGroups) out.push(required(`rules[${i}].apiGroups`));
      });
      break;
    case 'RoleBinding':
    case 'ClusterRoleBinding':
      if (!o.roleRef?.name) out.push(required('roleRef.name'));
      if (o.roleRef && !['Role', 'ClusterRole'].includes(o.roleRef.kind))
        out.push(unsupported('roleRef.kind', o.roleRef.kind, ['Role', 'ClusterRole']));
      if (rt.kind === 'ClusterRoleBinding' && o.roleRef?.kind === 'Role')
        out.push(unsupported('roleRef.kind', 'Role', ['ClusterRole']));
      ((o.subjects ?? []) as any[]).forEach((s, i) => {
        if (!s.name) out.push(required(`subjects[${i}].name`));
        if (!['ServiceAccount', 'User', 'Group'].includes(s.kind))
          out.push(unsupported(`subjects[${i}].kind`, s.kind, ['Group', 'ServiceAccount', 'User']));
        if (s.kind === 'ServiceAccount' && rt.kind === 'ClusterRoleBinding' && !s.namespace)
          out.push(required(`subjects[${i}].namespace`));
      });
      break;
    case 'LeaderWorkerSet': {
      const lwt = spec?.leaderWorkerTemplate;
      if (!lwt?.workerTemplate) out.push(required('spec.leaderWorkerTemplate.workerTemplate'));
      else
        out.push(
          ...podSpecProblems('spec.leaderWorkerTemplate.workerTemplate.spec', lwt.workerTemplate.spec),
        );
      if (lwt?.leaderTemplate)
        out.push(
          ...podSpecProblems('spec.leaderWorkerTemplate.leaderTemplate.spec', lwt.leaderTemplate.spec),
        );
      if (typeof lwt?.size === 'number' && lwt.size < 1)
        out.push(
          invalidValue(
            'spec.leaderWorkerTemplate.size',
            lwt.size,
            'spec.leaderWorkerTemplate.size in body should be greater than or equal to 1',
          ),
        );
      if (spec?.startupPolicy && !['LeaderCreated', 'LeaderReady'].includes(spec.startupPolicy)) {
        out.push(unsupported('spec.startupPolicy', spec.startupPolicy, ['LeaderCreated', 'LeaderReady']));
      }
      if (
        lwt?.restartPolicy &&
        !['RecreateGroupOnPodRestart', 'None', 'Default'].includes(lwt.restartPolicy)
      ) {
        out.push(
          unsupported('spec.leaderWorkerTemplate.restartPolicy', lwt.restartPolicy, [
            'RecreateGroupOnPodRestart',
            'None',
          ]),
        );
      }
      break;
    }
    case 'InferencePool': {
      if (!spec?.selector?.matchLabels || Object.keys(spec.selector.matchLabels).length === 0)
        out.push(required('spec.selector.matchLabels'));
      const ports: any[] = spec?.targetPorts ?? [];
      if (ports.length === 0) out.push(required('spec.targetPorts'));
      if (ports.length > 8)
        out.push({ field: 'spec.targetPorts', message: 'Too many: must have at most 8 items' });
      ports.forEach((p, i) => {
        if (typeof p.number !== 'number' || p.number < 1 || p.number > 65535)
          out.push(
            invalidValue(`spec.targetPorts[${i}].number`, p.number, 'must be between 1 and 65535, inclusive'),
          );
      });
      const epp = spec?.endpointPickerRef;
      if (!epp?.name) out.push(required('spec.endpointPickerRef.name'));
      if (epp?.failureMode && !['FailOpen', 'FailClose'].includes(epp.failureMode)) {
        out.push(
          unsupported('spec.endpointPickerRef.failureMode', epp.failureMode, ['FailOpen', 'FailClose']),
        );
      }
      if ((epp?.kind ?? 'Service') === 'Service' && !epp?.port?.number)
        out.push(required('spec.endpointPickerRef.port'));
      break;
    }
  }
  return out;
}

kindValidators.push((rt, o) => {
  const decoding = decodingProblems(rt, o);
  // Wrong types stop the decoder; unknown fields are reported with the rest (when strict).
  if (decoding.some((p) => p.message !== 'unknown field')) return decoding;
  return [...decoding, ...kindProblems(rt, o)];
});
