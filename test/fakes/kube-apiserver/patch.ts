/**
 * The four PATCH content types the API server takes: JSON merge patch (RFC 7386), strategic merge patch
 * (merge patch, but the lists the Kubernetes types mark with a merge key are merged by that key),
 * JSON patch (RFC 6902), and server-side apply (here: a strategic merge of the applied configuration).
 */

type Json = unknown;
const isObj = (v: Json): v is Record<string, Json> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export class PatchError extends Error {}

export function mergePatch(target: Json, patch: Json): Json {
  if (!isObj(patch)) return structuredClone(patch);
  const out: Record<string, Json> = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) Reflect.deleteProperty(out, k);
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

// Lists merged by key in a strategic merge patch (the patchMergeKey tags of k8s.io/api), by field name.
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  env: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  ports: 'containerPort',
  imagePullSecrets: 'name',
  conditions: 'type',
  ownerReferences: 'uid',
  hostAliases: 'ip',
  topologySpreadConstraints: 'topologyKey',
  finalizers: '',
};

export function strategicMergePatch(target: Json, patch: Json, field = ''): Json {
  if (Array.isArray(patch)) {
    const key = MERGE_KEYS[field];
    if (key === undefined || !Array.isArray(target)) return structuredClone(patch);
    if (key === '') return [...new Set([...(target as Json[]), ...patch])];
    // Services' ports merge by port, not containerPort; fall back to replacing when items lack the key.
    const k = field === 'ports' && patch.some((p) => isObj(p) && p['port'] !== undefined) ? 'port' : key;
    if (!patch.every((p) => isObj(p) && p[k] !== undefined)) return structuredClone(patch);
    const out = (target as Json[]).map((t) => structuredClone(t));
    for (const p of patch as Record<string, Json>[]) {
      if (p['$patch'] === 'delete') {
        const i = out.findIndex((t) => isObj(t) && t[k] === p[k]);
        if (i >= 0) out.splice(i, 1);
        continue;
      }
      const i = out.findIndex((t) => isObj(t) && t[k] === p[k]);
      if (i >= 0) out[i] = strategicMergePatch(out[i], p);
      else out.push(strategicMergePatch(undefined, p));
    }
    return out;
  }
  if (!isObj(patch)) return structuredClone(patch);
  if (patch['$patch'] === 'replace') {
    const { $patch: _, ...rest } = patch;
    return structuredClone(rest);
  }
  const out: Record<string, Json> = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue;
    if (v === null) Reflect.deleteProperty(out, k);
    else out[k] = strategicMergePatch(out[k], v, k);
  }
  return out;
}

const unescape = (s: string) => s.replaceAll('~1', '/').replaceAll('~0', '~');

function parsePointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new PatchError(`invalid JSON pointer: ${path}`);
  return path.slice(1).split('/').map(unescape);
}

function getAt(doc: Json, tokens: string[]): Json {
  let cur = doc;
  for (const t of tokens) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObj(cur)) cur = cur[t];
    else return undefined;
  }
  return cur;
}

function parentOf(doc: Json, tokens: string[], path: string): { parent: Json; last: string } {
  const parent = getAt(doc, tokens.slice(0, -1));
  if (!isObj(parent) && !Array.isArray(parent)) throw new PatchError(`doc is missing path: "${path}"`);
  return { parent, last: tokens[tokens.length - 1] ?? '' };
}

/** RFC 6902, with the messages of evanphx/json-patch that the API server returns. */
export function jsonPatch(doc: Json, ops: Json): Json {
  if (!Array.isArray(ops))
    throw new PatchError('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  let out = structuredClone(doc);
  for (const raw of ops) {
    if (!isObj(raw)) throw new PatchError('invalid JSON patch operation');
    const op = raw as { op?: string; path?: string; from?: string; value?: Json };
    const path = op.path ?? '';
    const tokens = parsePointer(path);
    const add = (value: Json) => {
      if (tokens.length === 0) {
        out = value;
        return;
      }
      const { parent, last } = parentOf(out, tokens, path);
      if (Array.isArray(parent)) {
        const i = last === '-' ? parent.length : Number(last);
        if (!Number.isInteger(i) || i < 0 || i > parent.length)
          throw new PatchError(`Unable to access invalid index: ${last}`);
        parent.splice(i, 0, value);
      } else (parent as Record<string, Json>)[last] = value;
    };
    const remove = (p: string, t: string[]) => {
      const { parent, last } = parentOf(out, t, p);
      if (Array.isArray(parent)) {
        const i = Number(last);
        if (!(i >= 0 && i < parent.length))
          throw new PatchError(`Unable to remove nonexistent key: ${last}: missing value`);
        return parent.splice(i, 1)[0];
      }
      const o = parent as Record<string, Json>;
      if (!Object.hasOwn(o, last))
        throw new PatchError(`Unable to remove nonexistent key: ${last}: missing value`);
      const v = o[last];
      Reflect.deleteProperty(o, last);
      return v;
    };
    switch (op.op) {
      case 'add':
        add(structuredClone(op.value));
        break;
      case 'remove':
        remove(path, tokens);
        break;
      case 'replace':
        if (getAt(out, tokens) === undefined)
          throw new PatchError(
            `replace operation does not apply: doc is missing key: ${path}: missing value`,
          );
        remove(path, tokens);
        add(structuredClone(op.value));
        break;
      case 'move': {
        const from = op.from ?? '';
        const v = remove(from, parsePointer(from));
        add(v);
        break;
      }
      case 'copy': {
        const v = getAt(out, parsePointer(op.from ?? ''));
        if (v === undefined)
          throw new PatchError(`copy operation does not apply: doc is missing from path: ${op.from ?? ''}`);
        add(structuredClone(v));
        break;
      }
      case 'test':
        if (JSON.stringify(getAt(out, tokens)) !== JSON.stringify(op.value))
          throw new PatchError('testing value failed');
        break;
      default:
        throw new PatchError(`Unexpected kind: ${String(op.op)}`);
    }
  }
  return out;
}
