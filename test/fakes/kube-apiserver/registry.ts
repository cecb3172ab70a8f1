/**
 * The storage and the generic registry: one global resourceVersion counter (as etcd's revision), a bounded
 * history of changes for watches, and create/update/delete with the metadata rules of the real server.
 */
import { randomUUID } from 'node:crypto';
import { ApiError, alreadyExists, badRequest, conflict, notFound } from './errors.js';
import { apiVersionOf, type ResourceType, RESOURCES } from './resources.js';

/** A stored object: apiVersion, kind, metadata and whatever its kind carries. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: any;
  status?: any;
  [field: string]: any;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  generation?: number;
  creationTimestamp: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  generateName?: string;
  finalizers?: string[];
  [field: string]: any;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  rv: number;
  type: EventType;
  rt: ResourceType;
  object: KubeObject;
  /** The object before a MODIFIED or DELETED. */
  old?: KubeObject;
}

/** Checks an object before it is stored; throws an ApiError (400 or 422). */
export type Validator = (
  rt: ResourceType,
  obj: KubeObject,
  opts: { strict: boolean; old?: KubeObject; warnings?: string[] },
) => void;

/** Fills in the defaults the real server's defaulting functions set. */
export type Defaulter = (rt: ResourceType, obj: KubeObject) => void;

export interface WriteOptions {
  dryRun?: boolean;
  /** fieldValidation=Strict: unknown fields are refused. */
  strict?: boolean;
  /** fieldValidation=Warn: what was dropped is said here (the Warning header). */
  warnings?: string[];
  /** A control loop's own write (a Binding, a status): not validated again. */
  internal?: boolean;
}

const ALNUM = 'bcdfghjklmnpqrstvwxz2456789'; // the apiserver's name generator alphabet (no vowels)
export const randomSuffix = (n: number) =>
  Array.from({ length: n }, () => ALNUM[Math.floor(Math.random() * ALNUM.length)]).join('');

const key = (ns: string | undefined, name: string) => `${ns ?? ''}/${name}`;
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const withoutMeta = (o: KubeObject) => {
  const { metadata: _m, status: _s, ...rest } = o;
  return rest;
};

export class Registry {
  #rv = 1000;
  #objects = new Map<ResourceType, Map<string, KubeObject>>(RESOURCES.map((r) => [r, new Map()]));
  #history: Change[] = [];
  #listeners = new Set<(c: Change) => void>();
  /** The newest resourceVersion no longer in the history: a watch from before it gets 410 Gone. */
  compactedRv = 1000;
  historyLimit = 10_000;
  validate: Validator = () => undefined;
  defaults: Defaulter = () => undefined;

  get resourceVersion() {
    return String(this.#rv);
  }

  /** Drops history so that watches from before the current resourceVersion get 410. */
  compact(keep = 0) {
    const drop = Math.max(0, this.#history.length - keep);
    const dropped = this.#history.splice(0, drop);
    if (dropped.length > 0) this.compactedRv = dropped[dropped.length - 1]!.rv;
    if (keep === 0) this.compactedRv = this.#rv;
  }

  setHistoryLimit(n: number) {
    this.historyLimit = n;
    if (this.#history.length > n) this.compact(n);
  }

  /** Changes after `rv`, or undefined when they are no longer kept. */
  since(rv: number): Change[] | undefined {
    if (rv < this.compactedRv) return undefined;
    return this.#history.filter((c) => c.rv > rv);
  }

  subscribe(fn: (c: Change) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  get(rt: ResourceType, ns: string | undefined, name: string): KubeObject | undefined {
    return this.#objects.get(rt)!.get(key(rt.namespaced ? ns : undefined, name));
  }

  mustGet(rt: ResourceType, ns: string | undefined, name: string): KubeObject {
    const o = this.get(rt, ns, name);
    if (!o) throw notFound(rt, name);
    return o;
  }

  list(rt: ResourceType, ns?: string): KubeObject[] {
    const all = [...this.#objects.get(rt)!.values()];
    const items = ns === undefined || !rt.namespaced ? all : all.filter((o) => o.metadata.namespace === ns);
    // etcd returns keys in order: namespace, then name.
    return items.sort((a, b) =>
      key(a.metadata.namespace, a.metadata.name).localeCompare(key(b.metadata.namespace, b.metadata.name)),
    );
  }

  byUid(uid: string): { rt: ResourceType; obj: KubeObject } | undefined {
    for (const [rt, m] of this.#objects)
      for (const obj of m.values()) if (obj.metadata.uid === uid) return { rt, obj };
    return undefined;
  }

  #record(type: EventType, rt: ResourceType, object: KubeObject, old?: KubeObject) {
    const change: Change = { rv: this.#rv, type, rt, object, ...(old ? { old } : {}) };
    this.#history.push(change);
    if (this.#history.length > this.historyLimit) this.compact(this.historyLimit);
    for (const fn of [...this.#listeners]) fn(change);
  }

  #checkNamespace(rt: ResourceType, ns: string | undefined, name: string) {
    if (!rt.namespaced) return;
    if (!ns) throw badRequest('the server could not find the requested resource');
    const nsRt = RESOURCES.find((r) => r.plural === 'namespaces')!;
    const nsObj = this.get(nsRt, undefined, ns);
    if (!nsObj) throw notFound(nsRt, ns);
    if (nsObj.metadata.deletionTimestamp) {
      throw new ApiError({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `${rt.plural} "${name}" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`,
        reason: 'Forbidden',
        code: 403,
      });
    }
  }

  create(rt: ResourceType, input: unknown, opts: WriteOptions & { namespace?: string } = {}): KubeObject {
    const obj = structuredClone(input) as KubeObject;
    if (typeof obj !== 'object' || Array.isArray(obj))
      throw badRequest('Object cannot be handled: not a JSON object');
    obj.apiVersion = apiVersionOf(rt);
    obj.kind = rt.kind;
    const meta = ((obj as { metadata?: ObjectMeta }).metadata ??= {} as ObjectMeta);
    if (rt.namespaced) {
      if (opts.namespace && meta.namespace && meta.namespace !== opts.namespace) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      meta.namespace = opts.namespace ?? meta.namespace ?? 'default';
    } else delete meta.namespace;
    if (!meta.name && meta.generateName) meta.name = meta.generateName + randomSuffix(5);
    this.validate(rt, obj, { strict: opts.strict ?? false, warnings: opts.warnings });
    this.#checkNamespace(rt, meta.namespace, meta.name);
    if (this.get(rt, meta.namespace, meta.name)) throw alreadyExists(rt, meta.name);
    if (meta.resourceVersion) throw badRequest('resourceVersion should not be set on objects to be created');
    meta.uid = randomUUID();
    meta.creationTimestamp = now();
    meta.generation = 1;
    delete meta.deletionTimestamp;
    // Create ignores the status of kinds that have a status subresource (a node registers with its own).
    if (rt.subresources.includes('status') && rt.kind !== 'Node') delete obj.status;
    this.defaults(rt, obj);
    if (opts.dryRun) return { ...obj, metadata: { ...meta, resourceVersion: '' } };
    meta.resourceVersion = String(++this.#rv);
    this.#objects.get(rt)!.set(key(meta.namespace, meta.name), obj);
    this.#record('ADDED', rt, obj);
    return structuredClone(obj);
  }

  /**
   * PUT: replaces the object (or only its status for the status subresource). A stale resourceVersion is a
   * 409 Conflict; an update that changes nothing stores nothing and keeps the resourceVersion, as etcd3 does.
   */
  update(
    rt: ResourceType,
    input: unknown,
    opts: WriteOptions & { namespace?: string; name: string; subresource?: 'status' | '' },
  ): KubeObject {
    const next = structuredClone(input) as KubeObject;
    if (typeof next !== 'object' || Array.isArray(next))
      throw badRequest('Object cannot be handled: not a JSON object');
    (next as { metadata?: ObjectMeta }).metadata ??= {} as ObjectMeta;
    if (next.metadata.name && next.metadata.name !== opts.name) {
      throw badRequest(
        `the name of the object (${next.metadata.name}) does not match the name on the URL (${opts.name})`,
      );
    }
    const old = this.mustGet(rt, opts.namespace, opts.name);
    if (next.metadata.resourceVersion && next.metadata.resourceVersion !== old.metadata.resourceVersion) {
      throw conflict(rt, opts.name);
    }
    let obj: KubeObject;
    if (opts.subresource === 'status') {
      obj = { ...structuredClone(old), status: next.status };
    } else {
      obj = next;
      obj.apiVersion = apiVersionOf(rt);
      obj.kind = rt.kind;
      // The main resource ignores status where a status subresource owns it.
      if (rt.subresources.includes('status')) {
        if (old.status === undefined) delete obj.status;
        else obj.status = structuredClone(old.status);
      }
      if (!opts.internal)
        this.validate(rt, obj, { strict: opts.strict ?? false, old, warnings: opts.warnings });
    }
    const m = obj.metadata;
    m.name = old.metadata.name;
    if (rt.namespaced) m.namespace = old.metadata.namespace;
    else delete m.namespace;
    m.uid = old.metadata.uid;
    m.creationTimestamp = old.metadata.creationTimestamp;
    if (old.metadata.deletionTimestamp) m.deletionTimestamp = old.metadata.deletionTimestamp;
    if (old.metadata.deletionGracePeriodSeconds !== undefined)
      m.deletionGracePeriodSeconds = old.metadata.deletionGracePeriodSeconds;
    m.generation = (old.metadata.generation ?? 1) + (sameJson(withoutMeta(obj), withoutMeta(old)) ? 0 : 1);
    m.resourceVersion = old.metadata.resourceVersion;
    this.defaults(rt, obj);
    if (sameJson(obj, old) || opts.dryRun) return structuredClone(opts.dryRun ? obj : old);
    m.resourceVersion = String(++this.#rv);
    this.#objects.get(rt)!.set(key(m.namespace, m.name), obj);
    this.#record('MODIFIED', rt, obj, old);
    return structuredClone(obj);
  }

  /** Applies `fn` to a copy of the stored object and stores the result (controllers' read-modify-write). */
  mutate(
    rt: ResourceType,
    ns: string | undefined,
    name: string,
    fn: (o: KubeObject) => void,
    subresource: 'status' | '' = '',
  ) {
    const cur = this.get(rt, ns, name);
    if (!cur) return undefined;
    const copy = structuredClone(cur);
    fn(copy);
    return this.update(rt, copy, { namespace: ns, name, subresource, internal: true });
  }

  /** Removes the object now (its DELETED event carries the last state with a new resourceVersion). */
  remove(rt: ResourceType, ns: string | undefined, name: string): KubeObject {
    const old = this.mustGet(rt, ns, name);
    const obj = structuredClone(old);
    obj.metadata.resourceVersion = String(++this.#rv);
    this.#objects.get(rt)!.delete(key(old.metadata.namespace, old.metadata.name));
    this.#record('DELETED', rt, obj, old);
    return obj;
  }

  /** Marks an object as terminating (deletionTimestamp), as a graceful pod deletion does. */
  markDeleting(rt: ResourceType, ns: string | undefined, name: string, graceSeconds: number): KubeObject {
    const old = this.mustGet(rt, ns, name);
    if (old.metadata.deletionTimestamp) return structuredClone(old);
    const obj = structuredClone(old);
    obj.metadata.deletionTimestamp = new Date(Date.now() + graceSeconds * 1000)
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    obj.metadata.deletionGracePeriodSeconds = graceSeconds;
    obj.metadata.resourceVersion = String(++this.#rv);
    this.#objects.get(rt)!.set(key(obj.metadata.namespace, obj.metadata.name), obj);
    this.#record('MODIFIED', rt, obj, old);
    return structuredClone(obj);
  }

  /** Objects whose ownerReferences name `uid`. */
  dependents(uid: string): { rt: ResourceType; obj: KubeObject }[] {
    const out: { rt: ResourceType; obj: KubeObject }[] = [];
    for (const [rt, m] of this.#objects) {
      for (const obj of m.values())
        if (obj.metadata.ownerReferences?.some((r) => r.uid === uid)) out.push({ rt, obj });
    }
    return out;
  }
}
