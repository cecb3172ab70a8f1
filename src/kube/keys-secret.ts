import { randomBytes } from 'node:crypto';

import type { V1Secret } from '@kubernetes/client-node';

import type { KubernetesSettings } from '../config/schema.js';
import { LlmgwError } from '../core/errors.js';
import { generateSecret } from '../core/secrets.js';

import { asApi, loadConfig } from './client.js';
import { apiStatus, kubeError } from './errors.js';
import type { KSecret } from './kube-types.js';

/**
 * The control plane's own secrets in Kubernetes mode: the admin key and the secret engine keys
 * are sealed with, made at the first start and kept in a Secret llmgw owns, read back at every
 * later start. The Helm chart renders no random values (GitOps tools render it without a
 * cluster, so a drawn value would change at every sync and leave the sealed keys unreadable).
 */

/** The Secret's keys: the names the chart's own Secret had, so an upgrade finds the old values. */
export const keysSecretFields = { adminKey: 'admin-key', engineKeySecret: 'engine-key-secret' } as const;
export type KeyField = keyof typeof keysSecretFields;
export type KeysFound = { [K in KeyField]?: string | undefined };

const rules: Record<KeyField, { min: number; make: () => string; openssl: string }> = {
  adminKey: { min: 24, make: () => generateSecret('key'), openssl: 'openssl rand -hex 24' },
  engineKeySecret: { min: 32, make: () => randomBytes(32).toString('hex'), openssl: 'openssl rand -hex 32' },
};

export type KeysPlan =
  | { kind: 'use'; values: KeysFound }
  | { kind: 'create' | 'update'; data: Record<string, string>; values: KeysFound };

/**
 * Pure: what to do with the Secret as read (`existing`: its base64 data, undefined when there is
 * none) so that it holds every field of `want`: use it, create it, or add the missing fields.
 * A value there that llmgw would refuse is refused here, naming the Secret and its key.
 */
export function planKeysSecret(o: {
  where: string;
  existing: Record<string, string> | undefined;
  want: readonly KeyField[];
  make?: (field: KeyField) => string;
}): KeysPlan {
  const make = o.make ?? ((f: KeyField) => rules[f].make());
  const data: Record<string, string> = { ...o.existing };
  const values: KeysFound = {};
  let added = false;
  for (const field of o.want) {
    const key = keysSecretFields[field];
    const stored = data[key];
    if (stored === undefined || stored === '') {
      const made = make(field);
      data[key] = Buffer.from(made, 'utf8').toString('base64');
      values[field] = made;
      added = true;
      continue;
    }
    // kubectl create secret --from-file keeps the file's last newline.
    const value = Buffer.from(stored, 'base64').toString('utf8').trim();
    const rule = rules[field];
    if (value.length < rule.min || /\s/.test(value)) {
      throw new LlmgwError(
        'invalid_argument',
        `the Secret ${o.where} holds ${key}, but not ${rule.min} or more characters without spaces: put one there (${rule.openssl}), or remove that key to have llmgw make one`,
      );
    }
    values[field] = value;
  }
  if (!added) return { kind: 'use', values };
  return { kind: o.existing === undefined ? 'create' : 'update', data, values };
}

export interface KeysSecretOptions {
  kubeconfig: string;
  context: string;
  namespace: string;
  name: string;
  want: readonly KeyField[];
  /** Tests pin the values made. */
  make?: (field: KeyField) => string;
}

const attempts = 5;

/** The one Secret's calls; errors as the client library throws them (a 409 is retried). */
export interface OneSecretApi {
  read(): Promise<KSecret | undefined>;
  create(body: KSecret): Promise<void>;
  replace(body: KSecret): Promise<void>;
}

/**
 * Reads the Secret, and creates it or adds the fields it lacks. Several control planes may start
 * at once: a create that finds it made, or an update that finds it changed (resourceVersion),
 * reads it again, so all of them use the values that were stored first.
 */
export async function ensureKeysSecret(o: KeysSecretOptions): Promise<KeysFound> {
  const k8s = await import('@kubernetes/client-node');
  const kc = await loadConfig({ namespace: o.namespace, kubeconfig: o.kubeconfig, context: o.context });
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const { name, namespace } = o;
  const api: OneSecretApi = {
    async read() {
      try {
        return await core.readNamespacedSecret({ name, namespace });
      } catch (e) {
        if (apiStatus(e)?.code === 404) return undefined;
        throw e;
      }
    },
    async create(body) {
      await core.createNamespacedSecret({ namespace, body: asApi<V1Secret>(body) });
    },
    async replace(body) {
      await core.replaceNamespacedSecret({ name, namespace, body: asApi<V1Secret>(body) });
    },
  };
  return settleKeysSecret(api, o);
}

/** ensureKeysSecret over any API (tests give one that always loses the race). */
export async function settleKeysSecret(
  api: OneSecretApi,
  o: Pick<KeysSecretOptions, 'namespace' | 'name' | 'want' | 'make'>,
): Promise<KeysFound> {
  const { name, namespace } = o;
  const where = `${namespace}/${name}`;
  const act = (verb: 'get' | 'create' | 'update') => ({ verb, resource: 'secrets', namespace, name });
  for (let i = 0; i < attempts; i++) {
    let existing: KSecret | undefined;
    try {
      existing = await api.read();
    } catch (e) {
      throw kubeError(e, act('get'));
    }
    const plan = planKeysSecret({
      where,
      existing: existing === undefined ? undefined : (existing.data ?? {}),
      want: o.want,
      ...(o.make === undefined ? {} : { make: o.make }),
    });
    if (plan.kind === 'use') return plan.values;
    try {
      // An update keeps its other keys, labels and resourceVersion (a change since the read is a 409).
      if (existing === undefined) await api.create(ownSecret(name, namespace, plan.data));
      else await api.replace({ ...existing, data: plan.data });
      return plan.values;
    } catch (e) {
      // Another control plane stored it first: read what it stored.
      if (apiStatus(e)?.code === 409) continue;
      throw kubeError(e, act(plan.kind));
    }
  }
  throw new LlmgwError(
    'unavailable',
    `the Secret ${where} changed under each of ${attempts} tries to complete it: restart llmgw once the other writer is done`,
  );
}

function ownSecret(name: string, namespace: string, data: Record<string, string>): KSecret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name,
      namespace,
      // No app.kubernetes.io/instance label: Argo CD would take it for the app's and prune it.
      labels: { 'app.kubernetes.io/managed-by': 'llmgw', 'app.kubernetes.io/part-of': 'llmgw' },
      annotations: {
        'llmgw.io/purpose':
          'the admin key and the secret engine keys are sealed with in the database; deleting it makes those keys unreadable',
      },
    },
    data,
  };
}

/**
 * The control plane's admin key and engine keys' secret: those the environment gives, the rest
 * from kubernetes.keys_secret when it names a Secret; undefined ones are made as off Kubernetes.
 */
export async function keysFromCluster(
  kube: KubernetesSettings | undefined,
  given: KeysFound,
): Promise<KeysFound & { engineKeySource?: string }> {
  const name = kube?.keys_secret.name ?? '';
  if (kube === undefined || name === '') return given;
  const want = (Object.keys(keysSecretFields) as KeyField[]).filter((f) => (given[f] ?? '') === '');
  if (want.length === 0) return given;
  const namespace = kube.keys_secret.namespace === '' ? kube.namespace : kube.keys_secret.namespace;
  const found = await ensureKeysSecret({
    kubeconfig: kube.kubeconfig,
    context: kube.context,
    namespace,
    name,
    want,
  });
  const engineKeySource = want.includes('engineKeySecret')
    ? `the Secret ${namespace}/${name} (key ${keysSecretFields.engineKeySecret})`
    : undefined;
  return {
    ...given,
    ...found,
    ...(engineKeySource === undefined ? {} : { engineKeySource }),
  };
}
