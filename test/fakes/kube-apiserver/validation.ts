/**
 * Validation as the real server does it, in two steps: decoding (fieldValidation=Strict refuses unknown
 * fields and wrong types with 400 "strict decoding error") and the kind's validation (422 Invalid with
 * field paths: names, required fields, selectors, quantities, ports).
 */
import { badRequest, invalid, type StatusCause } from './errors.js';
import type { KubeObject } from './registry.js';
import { resourceByKind, type ResourceType } from './resources.js';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A problem with an object: where, and what the real server says of it. */
export interface Problem {
  field: string;
  message: string;
  /** Decoding problems (unknown field, wrong type) are 400s; the rest are 422 Invalid. */
  decoding?: boolean;
  reason?: string;
  /** Where an unknown field sits, for pruning it when the request does not ask for strictness. */
  path?: PropertyKey[];
}

// Kinds whose names must be DNS-1123 labels (the rest take subdomains, RBAC takes path segments).
const LABEL_NAMES = new Set([
  'Namespace',
  'Service',
  'Deployment',
  'StatefulSet',
  'LeaderWorkerSet',
  'InferencePool',
]);

export function nameProblems(rt: ResourceType, obj: KubeObject): Problem[] {
  const name = obj.metadata.name as unknown;
  if (typeof name !== 'string' || name === '') {
    return [
      {
        field: 'metadata.name',
        message: 'Required value: name or generateName is required',
        reason: 'FieldValueRequired',
      },
    ];
  }
  if (rt.group === 'rbac.authorization.k8s.io') {
    return /[/%]/.test(name) || name === '.' || name === '..'
      ? [{ field: 'metadata.name', message: `Invalid value: "${name}": may not contain '/' or '%'` }]
      : [];
  }
  if (LABEL_NAMES.has(rt.kind)) {
    if (name.length > 63 || !DNS1123_LABEL.test(name)) {
      return [
        {
          field: 'metadata.name',
          message: `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
        },
      ];
    }
    return [];
  }
  if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) {
    return [
      {
        field: 'metadata.name',
        message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
      },
    ];
  }
  return [];
}

/** The kind's own checks beyond decoding; filled in by schema.ts. */
export const kindValidators: ((rt: ResourceType, obj: KubeObject) => Problem[])[] = [];

/**
 * Everything wrong with an object, as the real server would find it (decoding problems with
 * fieldValidation=Strict, then validation). For a chart's rendered manifests: [] means the server takes it.
 */
export function validateObject(obj: unknown): Problem[] {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj))
    return [{ field: '', message: 'Object cannot be handled: not a JSON object', decoding: true }];
  const o = obj as KubeObject;
  if (typeof o.apiVersion !== 'string' || o.apiVersion === '')
    return [{ field: 'apiVersion', message: 'Required value', decoding: true }];
  if (typeof o.kind !== 'string' || o.kind === '')
    return [{ field: 'kind', message: 'Required value', decoding: true }];
  const rt = resourceByKind(o.apiVersion, o.kind);
  if (!rt)
    return [
      {
        field: 'kind',
        message: `no matches for kind "${o.kind}" in version "${o.apiVersion}"`,
        decoding: true,
      },
    ];
  const copy = structuredClone(o);
  (copy as { metadata?: KubeObject['metadata'] }).metadata ??= {} as KubeObject['metadata'];
  if (!copy.metadata.name && copy.metadata.generateName)
    copy.metadata.name = `${copy.metadata.generateName}xxxxx`;
  return problemsOf(rt, copy, true);
}

export function problemsOf(rt: ResourceType, obj: KubeObject, strict: boolean): Problem[] {
  const all = [...nameProblems(rt, obj), ...kindValidators.flatMap((v) => v(rt, obj))];
  return strict ? all : all.filter((p) => !(p.decoding && p.message === 'unknown field'));
}

function prune(obj: KubeObject, path: PropertyKey[]) {
  let cur: unknown = obj;
  for (const k of path.slice(0, -1)) cur = (cur as Record<PropertyKey, unknown> | undefined)?.[k];
  if (cur && typeof cur === 'object') Reflect.deleteProperty(cur, path[path.length - 1]!);
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** What an update may not change, with the real validators' messages. */
export function immutableProblems(rt: ResourceType, obj: KubeObject, old: KubeObject): Problem[] {
  const out: Problem[] = [];
  const spec = obj.spec ?? {};
  const was = old.spec ?? {};
  switch (rt.kind) {
    case 'Deployment':
    case 'ReplicaSet':
    case 'StatefulSet':
    case 'LeaderWorkerSet':
      if (rt.kind !== 'LeaderWorkerSet' && !sameJson(spec.selector, was.selector)) {
        out.push({
          field: 'spec.selector',
          message: `Invalid value: ${JSON.stringify(spec.selector)}: field is immutable`,
        });
      }
      if (rt.kind === 'StatefulSet') {
        const mutable = [
          'replicas',
          'ordinals',
          'template',
          'updateStrategy',
          'revisionHistoryLimit',
          'persistentVolumeClaimRetentionPolicy',
          'minReadySeconds',
        ];
        const strip = (s: Record<string, unknown>) =>
          Object.fromEntries(Object.entries(s).filter(([k]) => !mutable.includes(k)));
        if (!sameJson(strip(spec), strip(was))) {
          out.push({
            field: 'spec',
            message:
              "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
          });
        }
      }
      if (
        rt.kind === 'LeaderWorkerSet' &&
        spec.leaderWorkerTemplate?.size !== was.leaderWorkerTemplate?.size
      ) {
        out.push({
          field: 'spec.leaderWorkerTemplate.size',
          message: `Invalid value: ${String(spec.leaderWorkerTemplate?.size)}: field is immutable`,
        });
      }
      break;
    case 'Pod': {
      // Only images, activeDeadlineSeconds and added tolerations may change (nodeName only through a Binding).
      const strip = (s: any) => ({
        ...s,
        containers: (s.containers ?? []).map((c: any) => ({ ...c, image: undefined })),
        initContainers: (s.initContainers ?? []).map((c: any) => ({ ...c, image: undefined })),
        activeDeadlineSeconds: undefined,
        tolerations: undefined,
      });
      if (!sameJson(strip(spec), strip(was))) {
        out.push({
          field: 'spec',
          message:
            'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
        });
      }
      break;
    }
    case 'Secret':
    case 'ConfigMap':
      if (old['immutable'] === true && (!sameJson(obj['data'], old['data']) || obj['immutable'] !== true)) {
        out.push({ field: 'data', message: 'Forbidden: field is immutable when `immutable` is set' });
      }
      break;
    case 'Service':
      if (was.clusterIP && spec.clusterIP && spec.clusterIP !== was.clusterIP) {
        out.push({
          field: 'spec.clusterIPs[0]',
          message: `Invalid value: []string{"${String(spec.clusterIP)}"}: may not change once set`,
        });
      }
      break;
    case 'PersistentVolumeClaim': {
      const strip = (s: any) => ({ ...s, resources: undefined, volumeName: undefined });
      if (!sameJson(strip(spec), strip(was))) {
        out.push({
          field: 'spec',
          message:
            'Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims',
        });
      }
      break;
    }
  }
  return out;
}

/**
 * The registry's validator: throws the Status the real server returns. Without fieldValidation=Strict,
 * unknown fields are dropped, as the decoder does for Warn and Ignore.
 */
export function validateForServer(
  rt: ResourceType,
  obj: KubeObject,
  opts: { strict: boolean; old?: KubeObject; warnings?: string[] },
) {
  const all = problemsOf(rt, obj, true);
  if (!opts.strict) {
    for (const p of all) {
      if (!(p.decoding && p.message === 'unknown field' && p.path)) continue;
      prune(obj, p.path);
      opts.warnings?.push(`unknown field "${p.field}"`);
    }
  }
  const problems = [
    ...(opts.strict ? all : all.filter((p) => !(p.decoding && p.message === 'unknown field'))),
    ...(opts.old ? immutableProblems(rt, obj, opts.old) : []),
  ];
  const decoding = problems.filter((p) => p.decoding);
  if (decoding.length > 0) {
    const kind = rt.kind;
    const unknown = decoding.filter((p) => p.message === 'unknown field');
    if (unknown.length > 0) {
      const fields = unknown.map((p) => `unknown field "${p.field}"`).join(', ');
      throw badRequest(
        `${kind} in version "${rt.version}" cannot be handled as a ${kind}: strict decoding error: ${fields}`,
      );
    }
    const p = decoding[0]!;
    throw badRequest(`${kind} in version "${rt.version}" cannot be handled as a ${kind}: json: ${p.message}`);
  }
  if (problems.length > 0) {
    const causes: StatusCause[] = problems.map((p) => ({
      reason:
        p.reason ??
        (p.message.startsWith('Required value')
          ? 'FieldValueRequired'
          : p.message.startsWith('Unsupported value')
            ? 'FieldValueNotSupported'
            : p.message.startsWith('Forbidden')
              ? 'FieldValueForbidden'
              : p.message.startsWith('Duplicate value')
                ? 'FieldValueDuplicate'
                : p.message.startsWith('Not found')
                  ? 'FieldValueNotFound'
                  : 'FieldValueInvalid'),
      message: p.message,
      field: p.field,
    }));
    throw invalid(rt, obj.metadata.name, causes);
  }
}
