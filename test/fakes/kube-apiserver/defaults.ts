/** The defaults the real server's defaulting functions fill in (the ones clients read back). */
import type { KubeObject } from './registry.js';
import type { ResourceType } from './resources.js';

let nextClusterIp = 1;

function defaultContainers(list: any[] | undefined) {
  for (const c of list ?? []) {
    const tag = typeof c.image === 'string' ? (/:([^/:@]+)$/.exec(c.image)?.[1] ?? 'latest') : '';
    c.imagePullPolicy ??= tag === 'latest' && !String(c.image).includes('@') ? 'Always' : 'IfNotPresent';
    c.terminationMessagePath ??= '/dev/termination-log';
    c.terminationMessagePolicy ??= 'File';
    c.resources ??= {};
    const res = c.resources;
    // Requests default to limits where only limits are given.
    if (res.limits) res.requests = { ...res.limits, ...res.requests };
    for (const p of c.ports ?? []) p.protocol ??= 'TCP';
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      if (!probe) continue;
      probe.periodSeconds ??= 10;
      probe.timeoutSeconds ??= 1;
      probe.successThreshold ??= 1;
      probe.failureThreshold ??= 3;
      if (probe.httpGet) probe.httpGet.scheme ??= 'HTTP';
    }
  }
}

export function defaultPodSpec(spec: any) {
  if (!spec || typeof spec !== 'object') return;
  spec.restartPolicy ??= 'Always';
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.securityContext ??= {};
  if (spec.serviceAccountName) spec.serviceAccount ??= spec.serviceAccountName;
  defaultContainers(spec.containers);
  defaultContainers(spec.initContainers);
  for (const v of spec.volumes ?? []) {
    if (v.secret) v.secret.defaultMode ??= 420;
    if (v.configMap) v.configMap.defaultMode ??= 420;
  }
}

function qosClass(spec: any): string {
  const cs: any[] = [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])];
  const has = (c: any, k: 'requests' | 'limits', r: string) => c.resources?.[k]?.[r] !== undefined;
  if (cs.every((c) => !c.resources?.requests && !c.resources?.limits)) return 'BestEffort';
  const guaranteed = cs.every(
    (c) =>
      ['cpu', 'memory'].every((r) => has(c, 'limits', r)) &&
      ['cpu', 'memory'].every((r) => String(c.resources.requests?.[r]) === String(c.resources.limits[r])),
  );
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

export function applyDefaults(rt: ResourceType, obj: KubeObject) {
  const spec = obj.spec;
  switch (rt.kind) {
    case 'Pod':
      defaultPodSpec(spec);
      // The DefaultTolerationSeconds admission plugin: 300 s on not-ready and unreachable nodes.
      if (spec && typeof spec === 'object') {
        const tolerations: any[] = (spec.tolerations ??= []);
        for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
          if (!tolerations.some((t) => t.key === key && t.effect === 'NoExecute')) {
            tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
          }
        }
      }
      obj.status ??= {};
      obj.status.phase ??= 'Pending';
      obj.status.qosClass ??= qosClass(spec);
      break;
    case 'Deployment':
    case 'ReplicaSet':
    case 'StatefulSet':
      if (!spec) break;
      spec.replicas ??= 1;
      spec.revisionHistoryLimit ??= 10;
      if (rt.kind === 'Deployment') {
        spec.progressDeadlineSeconds ??= 600;
        spec.strategy ??= { type: 'RollingUpdate' };
        if ((spec.strategy.type ??= 'RollingUpdate') === 'RollingUpdate') {
          spec.strategy.rollingUpdate = {
            maxUnavailable: '25%',
            maxSurge: '25%',
            ...spec.strategy.rollingUpdate,
          };
        }
      }
      if (rt.kind === 'StatefulSet') spec.podManagementPolicy ??= 'OrderedReady';
      defaultPodSpec(spec.template?.spec);
      break;
    case 'Service':
      if (!spec) break;
      spec.type ??= 'ClusterIP';
      spec.sessionAffinity ??= 'None';
      if (spec.clusterIP === undefined || spec.clusterIP === '') {
        const n = nextClusterIp++;
        spec.clusterIP = `10.96.${Math.floor(n / 250)}.${(n % 250) + 1}`;
      }
      if (spec.clusterIP !== 'None') spec.clusterIPs ??= [spec.clusterIP];
      for (const p of spec.ports ?? []) {
        p.protocol ??= 'TCP';
        p.targetPort ??= p.port;
      }
      break;
    case 'Secret': {
      obj['type'] ??= 'Opaque';
      // stringData is write-only: the server folds it into data (base64) and drops it.
      const given = obj['stringData'] as Record<string, string> | undefined;
      if (given) {
        const data = (obj['data'] ?? {}) as Record<string, string>;
        for (const [k, v] of Object.entries(given)) data[k] = Buffer.from(v, 'utf8').toString('base64');
        obj['data'] = data;
        Reflect.deleteProperty(obj, 'stringData');
      }
      break;
    }
    case 'Namespace':
      obj.spec ??= { finalizers: ['kubernetes'] };
      obj.status = { phase: obj.metadata.deletionTimestamp ? 'Terminating' : 'Active' };
      obj.metadata.labels = { ...obj.metadata.labels, 'kubernetes.io/metadata.name': obj.metadata.name };
      break;
    case 'PersistentVolumeClaim':
      obj.status ??= { phase: 'Pending' };
      if (spec) spec.volumeMode ??= 'Filesystem';
      break;
    case 'LeaderWorkerSet':
      if (!spec) break;
      spec.replicas ??= 1;
      spec.startupPolicy ??= 'LeaderCreated';
      spec.leaderWorkerTemplate ??= {};
      spec.leaderWorkerTemplate.size ??= 1;
      spec.leaderWorkerTemplate.restartPolicy ??= 'RecreateGroupOnPodRestart';
      spec.rolloutStrategy ??= {
        type: 'RollingUpdate',
        rollingUpdateConfiguration: { maxUnavailable: 1, maxSurge: 0 },
      };
      defaultPodSpec(spec.leaderWorkerTemplate.leaderTemplate?.spec);
      defaultPodSpec(spec.leaderWorkerTemplate.workerTemplate?.spec);
      break;
  }
}
