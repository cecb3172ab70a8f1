/** The resource types the fake serves: group, version, plural and kind as the real API names them. */

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  plural: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  /** Subresources served under /<name>/<sub>. */
  subresources: string[];
  shortNames?: string[];
}

const core = (plural: string, kind: string, namespaced: boolean, subresources: string[] = []) =>
  ({
    group: '',
    version: 'v1',
    plural,
    singular: kind.toLowerCase(),
    kind,
    namespaced,
    subresources,
  }) as ResourceType;
const grouped = (
  gv: string,
  plural: string,
  kind: string,
  subresources: string[] = [],
  namespaced = true,
) => {
  const [group = '', version = ''] = gv.split('/');
  return {
    group,
    version,
    plural,
    singular: kind.toLowerCase(),
    kind,
    namespaced,
    subresources,
  } as ResourceType;
};

export const RESOURCES: readonly ResourceType[] = [
  core('namespaces', 'Namespace', false, ['status']),
  core('nodes', 'Node', false, ['status']),
  core('pods', 'Pod', true, ['status', 'log', 'binding']),
  core('secrets', 'Secret', true),
  core('configmaps', 'ConfigMap', true),
  core('services', 'Service', true, ['status']),
  core('serviceaccounts', 'ServiceAccount', true),
  core('persistentvolumeclaims', 'PersistentVolumeClaim', true, ['status']),
  core('events', 'Event', true),
  grouped('apps/v1', 'deployments', 'Deployment', ['status', 'scale']),
  grouped('apps/v1', 'replicasets', 'ReplicaSet', ['status', 'scale']),
  grouped('apps/v1', 'statefulsets', 'StatefulSet', ['status', 'scale']),
  grouped('networking.k8s.io/v1', 'ingresses', 'Ingress', ['status']),
  grouped('policy/v1', 'poddisruptionbudgets', 'PodDisruptionBudget', ['status']),
  grouped('rbac.authorization.k8s.io/v1', 'roles', 'Role'),
  grouped('rbac.authorization.k8s.io/v1', 'rolebindings', 'RoleBinding'),
  grouped('rbac.authorization.k8s.io/v1', 'clusterroles', 'ClusterRole', [], false),
  grouped('rbac.authorization.k8s.io/v1', 'clusterrolebindings', 'ClusterRoleBinding', [], false),
  grouped('leaderworkerset.x-k8s.io/v1', 'leaderworkersets', 'LeaderWorkerSet', ['status', 'scale']),
  grouped('inference.networking.k8s.io/v1', 'inferencepools', 'InferencePool', ['status']),
];

export const apiVersionOf = (rt: ResourceType) =>
  rt.group === '' ? rt.version : `${rt.group}/${rt.version}`;

/** The resource `kind` in `group/version` serves, if any. */
export function resourceByKind(apiVersion: string, kind: string): ResourceType | undefined {
  return RESOURCES.find((r) => apiVersionOf(r) === apiVersion && r.kind === kind);
}

export function resourceByPlural(group: string, version: string, plural: string): ResourceType | undefined {
  return RESOURCES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

/** How a Status names a resource: `pods`, `deployments.apps`. */
export const qualifiedName = (rt: ResourceType) => (rt.group === '' ? rt.plural : `${rt.plural}.${rt.group}`);
