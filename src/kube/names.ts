import { createHash } from 'node:crypto';

/**
 * Names of the objects llmgw makes in Kubernetes. Object names, label values and container
 * names must be DNS-1123 labels (lower case alphanumerics and `-`, starting and ending with an
 * alphanumeric, at most 63 characters); catalog names may hold `.`, `_`, `/` and capitals.
 */

export const maxLabel = 63;

/** The labels and annotation every object llmgw makes carries (the brief's shared decision). */
export const managedBy = { key: 'app.kubernetes.io/managed-by', value: 'llmgw' } as const;
export const modelLabel = 'llmgw.io/model';
export const profileLabel = 'llmgw.io/profile';
export const specHashAnnotation = 'llmgw.io/spec-hash';
/** Where `kubectl rollout restart` writes: a new value rolls the pods. */
export const restartedAtAnnotation = 'kubectl.kubernetes.io/restartedAt';

const short = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 8);

/**
 * `text` as a DNS-1123 label: lower case, every other character `-`, runs of `-` folded,
 * trimmed to alphanumerics at both ends. When that changed more than case or is too long,
 * cut to fit and ended with a short hash of the original, so two names never fold into one.
 */
export function dnsLabel(text: string, max = maxLabel): string {
  const folded = text
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '');
  const exact = folded === text.toLowerCase() && folded.length <= max && folded !== '';
  if (exact) return folded;
  const suffix = short(text);
  const room = max - suffix.length - 1;
  const head = folded.slice(0, room).replace(/-+$/, '');
  return head === '' ? `x-${suffix}` : `${head}-${suffix}`;
}

/**
 * The longest LeaderWorkerSet name whose pods can be made. Its worker StatefulSet of group G
 * is `<lws>-<G>` and labels its pods `controller-revision-hash: <lws>-<G>-<hash>` (a hash of
 * up to 10 characters), a label value of at most 63: 63 - 1 - 4 - 1 - 10 = 47 leaves group
 * indexes of 4 digits, more than the 10,000 replicas the catalog accepts. Worker pods
 * `<lws>-<G>-<W>` then fit too. The LeaderWorkerSet webhook itself accepts 63 (a DNS-1035
 * label), so a longer name is taken and only its pods fail.
 */
export const maxLeaderWorkerSetName = 47;

/**
 * A Deployment may have 63: its ReplicaSet `<name>-<hash>` is a DNS subdomain (253), and pods
 * are named from `<replicaset>-` by the API server's generateName, which cuts that to 58
 * before its 5 random characters; no label holds either name.
 */
export const maxDeploymentName = maxLabel;

/**
 * The Deployment (or, for a profile on several nodes, the LeaderWorkerSet) of one model's
 * profile: `llmgw-<model>-<profile>`, cut with a hash of the whole to what its kind's
 * controllers can extend.
 */
export function workloadName(model: string, profile: { name: string; nodes: number }): string {
  const max = profile.nodes > 1 ? maxLeaderWorkerSetName : maxDeploymentName;
  return dnsLabel(`llmgw-${model}-${profile.name}`, max);
}

/** The Secret holding one model's engine key. */
export function secretName(model: string): string {
  return dnsLabel(`llmgw-${model}-engine-key`);
}

/**
 * A label value (≤ 63: alphanumerics, `-`, `_`, `.`, alphanumeric at both ends): the name
 * itself when it is one; else its DNS label (the model's full name is in an annotation).
 */
export function labelValue(text: string): string {
  return /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/.test(text) ? text : dnsLabel(text);
}

/** A short, stable hash of what an object runs: a change of it is a rollout. */
export function specHash(value: unknown): string {
  return createHash('sha256').update(stableJson(value)).digest('hex').slice(0, 16);
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => a.localeCompare(b));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
