/**
 * The HTTP face of the fake: the real API's paths, verbs, content types, Status errors, list and watch.
 * https://kubernetes.io/docs/reference/using-api/api-concepts/
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import {
  ApiError,
  badRequest,
  gone,
  internalError,
  invalid,
  methodNotAllowed,
  notFound,
  pathNotFound,
  type Status,
  unauthorized,
  unsupportedMediaType,
  updateNeedsResourceVersion,
} from './errors.js';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch } from './patch.js';
import { type Change, type KubeObject, type Registry } from './registry.js';
import { apiVersionOf, qualifiedName, RESOURCES, resourceByPlural, type ResourceType } from './resources.js';
import {
  type FieldRequirement,
  matchFields,
  matchRequirements,
  parseFieldSelector,
  parseLabelSelector,
  type Requirement,
  SelectorError,
  selectorString,
} from './selectors.js';

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  gracePeriodSeconds?: number;
  dryRun?: boolean;
}

/** What the HTTP layer needs beyond the registry (the kubelet's part in pod deletion, pod logs). */
export interface ServerHooks {
  /** Stops a terminating pod's containers; the pod is removed when it settles. Absent: removed at once. */
  terminatePod?: (pod: KubeObject) => Promise<void>;
  /**
   * The kubelet's side of `GET .../pods/NAME/log`: what the container wrote so far, and whether it
   * has ended; undefined while the container has not started (the kubelet answers "waiting to start").
   */
  podLog?: (pod: KubeObject, container: string) => { text: () => string; ended: () => boolean } | undefined;
}

export interface HttpOptions {
  token?: string;
  defaultFieldValidation: 'Strict' | 'Warn' | 'Ignore';
  bookmarkIntervalMs: number;
}

interface Target {
  rt: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
  watch: boolean;
}

const BUILTIN_GROUPS = new Set(['', 'apps', 'rbac.authorization.k8s.io', 'networking.k8s.io', 'policy']);

/** Deletes an object as the API server and the garbage collector do together. */
export function deleteObject(
  reg: Registry,
  hooks: ServerHooks,
  target: { rt: ResourceType; namespace?: string; name: string },
  opts: DeleteOptions = {},
): KubeObject {
  const { rt, namespace, name } = target;
  const cur = reg.mustGet(rt, namespace, name);
  if (opts.dryRun) return cur;
  const policy = opts.propagationPolicy ?? 'Background';
  const collect = () => {
    for (const dep of reg.dependents(cur.metadata.uid)) {
      if (!reg.get(dep.rt, dep.obj.metadata.namespace, dep.obj.metadata.name)) continue;
      if (policy === 'Orphan') {
        reg.mutate(dep.rt, dep.obj.metadata.namespace, dep.obj.metadata.name, (o) => {
          o.metadata.ownerReferences = o.metadata.ownerReferences?.filter((r) => r.uid !== cur.metadata.uid);
          if (o.metadata.ownerReferences?.length === 0) delete o.metadata.ownerReferences;
        });
      } else {
        deleteObject(
          reg,
          hooks,
          { rt: dep.rt, namespace: dep.obj.metadata.namespace, name: dep.obj.metadata.name },
          { propagationPolicy: policy },
        );
      }
    }
  };
  if (rt.kind === 'Namespace') {
    // The namespace controller empties it, then it goes.
    const terminating = reg.markDeleting(rt, undefined, name, 0);
    queueMicrotask(() => {
      for (const r of RESOURCES) {
        if (!r.namespaced) continue;
        for (const o of reg.list(r, name))
          deleteObject(
            reg,
            hooks,
            { rt: r, namespace: name, name: o.metadata.name },
            { gracePeriodSeconds: 0 },
          );
      }
      if (reg.get(rt, undefined, name)) reg.remove(rt, undefined, name);
    });
    return terminating;
  }
  const grace = opts.gracePeriodSeconds ?? cur.spec?.terminationGracePeriodSeconds ?? 30;
  if (rt.kind === 'Pod' && cur.spec?.nodeName && grace > 0 && hooks.terminatePod) {
    const terminating = reg.markDeleting(rt, namespace, name, grace);
    void hooks.terminatePod(terminating).finally(() => {
      if (reg.get(rt, namespace, name)?.metadata.uid === cur.metadata.uid) reg.remove(rt, namespace, name);
    });
    collect();
    return terminating;
  }
  if (rt.kind === 'Pod' && hooks.terminatePod && cur.spec?.nodeName) void hooks.terminatePod(cur);
  const gone_ = reg.remove(rt, namespace, name);
  collect();
  return gone_;
}

function stripForList(rt: ResourceType, o: KubeObject): KubeObject {
  // Built-in types' list items carry no apiVersion/kind on the wire; custom resources' do.
  if (!BUILTIN_GROUPS.has(rt.group)) return o;
  const { apiVersion: _a, kind: _k, ...rest } = o;
  return rest as KubeObject;
}

function discovery(rt: ResourceType) {
  const verbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
  return [
    {
      name: rt.plural,
      singularName: rt.singular,
      namespaced: rt.namespaced,
      kind: rt.kind,
      verbs,
      ...(rt.shortNames ? { shortNames: rt.shortNames } : {}),
    },
    ...rt.subresources.map((s) => ({
      name: `${rt.plural}/${s}`,
      singularName: '',
      namespaced: rt.namespaced,
      kind: s === 'scale' ? 'Scale' : rt.kind,
      ...(s === 'scale' ? { group: 'autoscaling', version: 'v1' } : {}),
      verbs: s === 'log' ? ['get'] : ['get', 'patch', 'update'],
    })),
  ];
}

function groupVersions() {
  const groups = new Map<string, string[]>();
  for (const r of RESOURCES) {
    if (r.group === '') continue;
    const vs = groups.get(r.group) ?? [];
    if (!vs.includes(r.version)) vs.push(r.version);
    groups.set(r.group, vs);
  }
  return [...groups].map(([name, versions]) => ({
    name,
    versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
    preferredVersion: { groupVersion: `${name}/${versions[0]!}`, version: versions[0]! },
  }));
}

function scaleOf(rt: ResourceType, o: KubeObject) {
  const sel =
    rt.kind === 'LeaderWorkerSet'
      ? o.status?.hpaPodSelector
      : o.spec?.selector
        ? selectorString(o.spec.selector)
        : undefined;
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name: o.metadata.name,
      namespace: o.metadata.namespace,
      uid: o.metadata.uid,
      resourceVersion: o.metadata.resourceVersion,
      creationTimestamp: o.metadata.creationTimestamp,
    },
    spec: { replicas: o.spec?.replicas ?? 0 },
    status: { replicas: o.status?.replicas ?? 0, ...(sel ? { selector: sel } : {}) },
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`${what}: ${(e as Error).message}`);
  }
}

export class HttpFront {
  readonly server: Server;
  #watches = new Set<ServerResponse>();
  #warnings = new WeakMap<ServerResponse, string[]>();

  readonly reg: Registry;
  readonly hooks: ServerHooks;
  readonly opts: HttpOptions;

  constructor(reg: Registry, hooks: ServerHooks, opts: HttpOptions) {
    this.reg = reg;
    this.hooks = hooks;
    this.opts = opts;
    this.server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => this.#fail(res, e));
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  /** `verb resource` pairs RBAC denies (`get pods/log`, `list deployments.apps`). */
  readonly forbidden = new Set<string>();

  /** Watches answered 410 Gone so far, and those open now; lists answered so far. */
  readonly watchStats = { gone: 0, open: 0, lists: 0 };

  /** Ends every open watch, as an API server restart or its request timeout does. */
  dropWatches() {
    for (const w of this.#watches) w.end();
  }

  #silenced = new WeakSet<ServerResponse>();
  #failWatches = 0;

  /** The open watches write nothing more (events, bookmarks, their timeout's end) yet stay open. */
  silenceWatches() {
    for (const w of this.#watches) this.#silenced.add(w);
  }

  /** Breaks the connections of the open watches without ending their streams (a reset). */
  resetWatches() {
    for (const w of this.#watches) w.socket?.destroy();
  }

  /** The next `times` watch requests are answered 500 InternalError. */
  failWatches(times: number) {
    this.#failWatches = times;
  }

  async close() {
    for (const w of this.#watches) w.end();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  #send(res: ServerResponse, code: number, body: unknown) {
    if (res.headersSent) return;
    // Warning: 299 - "unknown field ..." per dropped field, as fieldValidation=Warn answers.
    const warnings = this.#warnings.get(res) ?? [];
    if (warnings.length > 0)
      res.setHeader(
        'warning',
        warnings.map((w) => `299 - ${JSON.stringify(w)}`),
      );
    res.writeHead(code, { 'content-type': 'application/json', 'audit-id': crypto.randomUUID() });
    res.end(JSON.stringify(body));
  }

  #fail(res: ServerResponse, e: unknown) {
    if (e instanceof ApiError) {
      this.#send(res, e.code, e.status);
      return;
    }
    const status: Status = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: e instanceof Error ? e.message : String(e),
      reason: 'InternalError',
      code: 500,
    };
    this.#send(res, 500, status);
  }

  #parsePath(path: string): Target | 'discovery' | undefined {
    const segs = path.split('/').filter((s) => s !== '');
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api' && segs.length >= 3) {
      group = '';
      version = segs[1]!;
      rest = segs.slice(2);
    } else if (segs[0] === 'apis' && segs.length >= 4) {
      group = segs[1]!;
      version = segs[2]!;
      rest = segs.slice(3);
    } else return undefined;
    const watch = rest[0] === 'watch';
    if (watch) rest = rest.slice(1);
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && resourceByPlural(group, version, rest[2]!)) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const rt = resourceByPlural(group, version, rest[0] ?? '');
    if (!rt || rest.length > 3) return undefined;
    if (namespace !== undefined && !rt.namespaced) return undefined;
    return { rt, namespace, name: rest[1], subresource: rest[2], watch };
  }

  #discovery(path: string): unknown {
    const segs = path.split('/').filter((s) => s !== '');
    if (path === '/version' || path === '/version/') {
      return { major: '1', minor: '33', gitVersion: 'v1.33.0-fake', platform: 'linux/amd64' };
    }
    if (segs.length === 1 && segs[0] === 'api') {
      return {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }],
      };
    }
    if (segs.length === 1 && segs[0] === 'apis')
      return { kind: 'APIGroupList', apiVersion: 'v1', groups: groupVersions() };
    if (segs.length === 2 && segs[0] === 'apis') {
      const g = groupVersions().find((x) => x.name === segs[1]);
      return g ? { kind: 'APIGroup', apiVersion: 'v1', ...g } : undefined;
    }
    const [group, version] =
      segs[0] === 'api' && segs.length === 2
        ? ['', segs[1]]
        : segs[0] === 'apis' && segs.length === 3
          ? [segs[1], segs[2]]
          : [];
    if (version === undefined) return undefined;
    const rts = RESOURCES.filter((r) => r.group === group && r.version === version);
    if (rts.length === 0) return undefined;
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: group === '' ? version : `${group!}/${version}`,
      resources: rts.flatMap(discovery),
    };
  }

  async #handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://x');
    const q = url.searchParams;
    if (['/healthz', '/livez', '/readyz'].includes(url.pathname)) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    if (this.opts.token !== undefined && req.headers.authorization !== `Bearer ${this.opts.token}`) {
      throw unauthorized();
    }
    const target = this.#parsePath(url.pathname);
    if (target === undefined || target === 'discovery') {
      const doc = req.method === 'GET' ? this.#discovery(url.pathname) : undefined;
      if (doc === undefined) throw pathNotFound();
      this.#send(res, 200, doc);
      return;
    }
    const { rt, namespace, name, subresource } = target;
    if (subresource !== undefined && !rt.subresources.includes(subresource)) throw pathNotFound();
    const method = req.method ?? 'GET';
    this.#authorize(target, method, q);
    const validation = q.get('fieldValidation') ?? this.opts.defaultFieldValidation;
    const strict = validation === 'Strict';
    const warnings = validation === 'Warn' ? [] : undefined;
    if (warnings) this.#warnings.set(res, warnings);
    const dryRun = q.get('dryRun') === 'All';

    if (name === undefined) {
      if (method === 'GET' && (target.watch || q.get('watch') === 'true' || q.get('watch') === '1')) {
        this.#watch(res, rt, namespace, q);
        return;
      }
      if (method === 'GET') {
        this.watchStats.lists++;
        this.#send(res, 200, this.#list(rt, namespace, q));
        return;
      }
      if (method === 'POST') {
        const body = parseJson(await readBody(req), 'Object cannot be handled');
        const created = this.reg.create(rt, body, { namespace, strict, dryRun, warnings });
        this.#send(res, 201, created);
        return;
      }
      if (method === 'DELETE') {
        const opts = await this.#deleteOptions(req, q);
        const items = this.#select(rt, namespace, q).map((o) =>
          deleteObject(
            this.reg,
            this.hooks,
            { rt, namespace: o.metadata.namespace, name: o.metadata.name },
            opts,
          ),
        );
        this.#send(res, 200, {
          kind: `${rt.kind}List`,
          apiVersion: apiVersionOf(rt),
          metadata: { resourceVersion: this.reg.resourceVersion },
          items,
        });
        return;
      }
      throw methodNotAllowed(`the server does not allow this method on the requested resource`);
    }
    if (target.watch) {
      // Watching one object: /watch/.../pods/NAME is a watch with a metadata.name field selector.
      q.set('fieldSelector', [q.get('fieldSelector'), `metadata.name=${name}`].filter(Boolean).join(','));
      this.#watch(res, rt, namespace, q);
      return;
    }
    if (subresource === 'binding') {
      if (method !== 'POST')
        throw methodNotAllowed('the server does not allow this method on the requested resource');
      const binding = parseJson(await readBody(req), 'Object cannot be handled') as {
        target?: { name?: string };
      };
      const pod = this.reg.mustGet(rt, namespace, name);
      const node = binding.target?.name;
      if (!node)
        throw invalid({ ...rt, kind: 'Binding' }, name, [
          { reason: 'FieldValueRequired', message: 'Required value', field: 'target.name' },
        ]);
      if (pod.spec?.nodeName) {
        throw new ApiError({
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `Operation cannot be fulfilled on pods/binding "${name}": pod ${name} is already assigned to node "${String(pod.spec.nodeName)}"`,
          reason: 'Conflict',
          details: { name, kind: 'pods/binding' },
          code: 409,
        });
      }
      this.reg.mutate(rt, namespace, name, (p) => {
        p.spec.nodeName = node;
      });
      this.#send(res, 201, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
      return;
    }
    if (subresource === 'log') {
      if (method !== 'GET')
        throw methodNotAllowed('the server does not allow this method on the requested resource');
      this.#log(res, this.reg.mustGet(rt, namespace, name), q);
      return;
    }
    const sub = subresource === 'status' ? 'status' : '';
    switch (method) {
      case 'GET': {
        const o = this.reg.mustGet(rt, namespace, name);
        this.#send(res, 200, subresource === 'scale' ? scaleOf(rt, o) : o);
        return;
      }
      case 'PUT': {
        const body = parseJson(await readBody(req), 'Object cannot be handled') as KubeObject;
        // Custom resources allow no unconditional update (their strategy's AllowUnconditionalUpdate is false).
        if (
          !BUILTIN_GROUPS.has(rt.group) &&
          subresource !== 'scale' &&
          !(body as Partial<KubeObject> | null)?.metadata?.resourceVersion
        )
          throw updateNeedsResourceVersion(rt, name);
        if (subresource === 'scale') {
          this.#send(res, 200, this.#setScale(rt, namespace, name, body));
          return;
        }
        const updated = this.reg.update(rt, body, {
          namespace,
          name,
          subresource: sub,
          strict,
          dryRun,
          warnings,
        });
        this.#send(res, 200, updated);
        return;
      }
      case 'PATCH': {
        const text = await readBody(req);
        const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
        this.#patch(res, { rt, namespace, name, subresource, type, text, q, strict, dryRun, warnings });
        return;
      }
      case 'DELETE': {
        const opts = await this.#deleteOptions(req, q);
        const cur = this.reg.mustGet(rt, namespace, name);
        const out = deleteObject(this.reg, this.hooks, { rt, namespace, name }, opts);
        if (rt.kind === 'Pod' || rt.kind === 'Namespace') {
          this.#send(res, 200, out);
          return;
        }
        this.#send(res, 200, {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Success',
          details: { name, ...(rt.group ? { group: rt.group } : {}), kind: rt.plural, uid: cur.metadata.uid },
        });
        return;
      }
      default:
        throw methodNotAllowed('the server does not allow this method on the requested resource');
    }
  }

  async #deleteOptions(req: IncomingMessage, q: URLSearchParams): Promise<DeleteOptions> {
    const text = await readBody(req);
    const body = (text.trim() ? parseJson(text, 'DeleteOptions') : {}) as DeleteOptions;
    const grace = q.get('gracePeriodSeconds');
    return {
      propagationPolicy:
        (q.get('propagationPolicy') as DeleteOptions['propagationPolicy']) ?? body.propagationPolicy,
      gracePeriodSeconds: grace !== null ? Number(grace) : body.gracePeriodSeconds,
      dryRun: q.get('dryRun') === 'All',
    };
  }

  #setScale(
    rt: ResourceType,
    namespace: string | undefined,
    name: string,
    scale: { metadata?: { resourceVersion?: string }; spec?: { replicas?: number } },
  ) {
    const cur = this.reg.mustGet(rt, namespace, name);
    const replicas = scale.spec?.replicas;
    if (typeof replicas !== 'number' || replicas < 0) {
      throw invalid(rt, name, [
        {
          reason: 'FieldValueInvalid',
          message: `Invalid value: ${String(replicas)}: must be greater than or equal to 0`,
          field: 'spec.replicas',
        },
      ]);
    }
    const next = structuredClone(cur);
    next.spec = { ...next.spec, replicas };
    if (scale.metadata?.resourceVersion) next.metadata.resourceVersion = scale.metadata.resourceVersion;
    return scaleOf(rt, this.reg.update(rt, next, { namespace, name }));
  }

  #patch(
    res: ServerResponse,
    p: {
      rt: ResourceType;
      namespace?: string;
      name: string;
      subresource?: string;
      type: string;
      text: string;
      q: URLSearchParams;
      strict: boolean;
      warnings?: string[];
      dryRun: boolean;
    },
  ) {
    const { rt, namespace, name, type, text, q } = p;
    const isApply = type === 'application/apply-patch+yaml' || type === 'application/apply-patch+cbor';
    let patch: unknown;
    if (isApply) {
      if (!q.get('fieldManager')) {
        throw invalid({ ...rt, group: 'meta.k8s.io', kind: 'PatchOptions' }, '', [
          {
            reason: 'FieldValueRequired',
            message: 'Required value: is required for apply patch',
            field: 'fieldManager',
          },
        ]);
      }
      try {
        patch = parseYaml(text);
      } catch (e) {
        throw badRequest(`error decoding YAML: ${(e as Error).message}`);
      }
    } else patch = parseJson(text, 'error decoding patch');
    const cur = this.reg.get(rt, namespace, name);
    if (!cur) {
      if (!isApply || p.subresource) throw notFound(rt, name);
      const obj = patch as KubeObject;
      if ((obj.metadata as KubeObject['metadata'] | undefined)?.name && obj.metadata.name !== name) {
        throw badRequest(
          `the name of the object (${obj.metadata.name}) does not match the name on the URL (${name})`,
        );
      }
      const created = this.#applying(true, { rt, namespace, obj }, () =>
        this.reg.create(
          rt,
          { ...obj, metadata: { ...obj.metadata, name } },
          { namespace, strict: true, dryRun: p.dryRun },
        ),
      );
      this.#send(res, 201, created);
      return;
    }
    const base = p.subresource === 'scale' ? scaleOf(rt, cur) : cur;
    let next: KubeObject;
    try {
      switch (type) {
        case 'application/json-patch+json':
          next = jsonPatch(base, patch) as KubeObject;
          break;
        case 'application/merge-patch+json':
          next = mergePatch(base, patch) as KubeObject;
          break;
        case 'application/strategic-merge-patch+json':
          if (!BUILTIN_GROUPS.has(rt.group)) {
            throw new ApiError({
              kind: 'Status',
              apiVersion: 'v1',
              metadata: {},
              status: 'Failure',
              message:
                'strategic merge patch is not supported for custom resources; use merge patch or server-side apply',
              reason: 'UnsupportedMediaType',
              code: 415,
            });
          }
          next = strategicMergePatch(base, patch) as KubeObject;
          break;
        default:
          if (!isApply) throw unsupportedMediaType(type);
          next = strategicMergePatch(base, patch) as KubeObject;
          // Applying keeps the stored resourceVersion unless the configuration names one.
          if (!(patch as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion)
            next.metadata.resourceVersion = cur.metadata.resourceVersion;
      }
    } catch (e) {
      if (e instanceof PatchError) {
        throw new ApiError({
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: e.message,
          reason: 'Invalid',
          code: 422,
        });
      }
      throw e;
    }
    if (p.subresource === 'scale') {
      this.#send(res, 200, this.#setScale(rt, namespace, name, next));
      return;
    }
    const sub = p.subresource === 'status' ? 'status' : '';
    const updated = this.#applying(isApply, { rt, namespace, obj: next }, () =>
      this.reg.update(rt, next, {
        namespace,
        name,
        subresource: sub,
        strict: p.strict || isApply,
        warnings: p.warnings,
        dryRun: p.dryRun,
      }),
    );
    this.#send(res, 200, updated);
  }

  /** Server-side apply reports fields the schema lacks in its own words (structured-merge-diff's). */
  #applying(
    isApply: boolean,
    target: { rt: ResourceType; namespace?: string; obj: KubeObject },
    write: () => KubeObject,
  ): KubeObject {
    const { rt, namespace, obj } = target;
    try {
      return write();
    } catch (e) {
      const m =
        e instanceof ApiError ? /strict decoding error: unknown field "([^"]+)"/.exec(e.message) : null;
      if (!isApply || !m) throw e;
      const ns = obj.metadata.namespace ?? namespace ?? '';
      throw new ApiError({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `failed to create typed patch object (${ns}/${obj.metadata.name}; ${apiVersionOf(rt)}, Kind=${rt.kind}): .${m[1]!}: field not declared in schema`,
        code: 500,
      });
    }
  }

  #selectors(rt: ResourceType, q: URLSearchParams): { labels: Requirement[]; fields: FieldRequirement[] } {
    try {
      return {
        labels: parseLabelSelector(q.get('labelSelector') ?? ''),
        fields: parseFieldSelector(q.get('fieldSelector') ?? '', rt),
      };
    } catch (e) {
      if (e instanceof SelectorError) throw badRequest(e.message);
      throw e;
    }
  }

  #select(rt: ResourceType, namespace: string | undefined, q: URLSearchParams): KubeObject[] {
    const { labels, fields } = this.#selectors(rt, q);
    return this.reg
      .list(rt, namespace)
      .filter((o) => matchRequirements(labels, o.metadata.labels) && matchFields(fields, o));
  }

  #list(rt: ResourceType, namespace: string | undefined, q: URLSearchParams) {
    let items = this.#select(rt, namespace, q);
    const metadata: Record<string, unknown> = { resourceVersion: this.reg.resourceVersion };
    const cont = q.get('continue');
    if (cont) {
      let after: string;
      try {
        after = (JSON.parse(Buffer.from(cont, 'base64').toString()) as { start: string }).start;
      } catch {
        throw badRequest('continue key is not valid: illegal base64 data');
      }
      items = items.filter((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}` > after);
    }
    const limit = Number(q.get('limit') ?? 0);
    if (limit > 0 && items.length > limit) {
      const last = items[limit - 1]!;
      metadata['continue'] = Buffer.from(
        JSON.stringify({
          v: 'meta.k8s.io/v1',
          rv: Number(this.reg.resourceVersion),
          start: `${last.metadata.namespace ?? ''}/${last.metadata.name}`,
        }),
      ).toString('base64');
      metadata['remainingItemCount'] = items.length - limit;
      items = items.slice(0, limit);
    }
    return {
      kind: `${rt.kind}List`,
      apiVersion: apiVersionOf(rt),
      metadata,
      items: items.map((o) => stripForList(rt, o)),
    };
  }

  /** RBAC's refusal, in the authorizer's words, of what forbid() denied. */
  #authorize(target: Target, method: string, q: URLSearchParams) {
    if (this.forbidden.size === 0) return;
    const { rt, namespace, name, subresource } = target;
    const watching = target.watch || q.get('watch') === 'true' || q.get('watch') === '1';
    const verb =
      method === 'GET'
        ? watching
          ? 'watch'
          : name === undefined
            ? 'list'
            : 'get'
        : ({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' } as Record<string, string>)[
            method
          ];
    const resource = `${rt.plural}${subresource === undefined ? '' : `/${subresource}`}`;
    const qualified = `${resource}${rt.group === '' ? '' : `.${rt.group}`}`;
    if (!this.forbidden.has(`${verb ?? ''} ${qualified}`)) return;
    throw new ApiError({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `${name === undefined ? qualifiedName(rt) : `${qualifiedName(rt)} "${name}"`} is forbidden: User "fake" cannot ${verb ?? ''} resource "${resource}" in API group "${rt.group}"${namespace === undefined ? ' at the cluster scope' : ` in the namespace "${namespace}"`}`,
      reason: 'Forbidden',
      details: {
        ...(name === undefined ? {} : { name }),
        ...(rt.group === '' ? {} : { group: rt.group }),
        kind: rt.plural,
      },
      code: 403,
    });
  }

  /**
   * A container's log as the API server relays the kubelet's: text/plain, the last tailLines lines,
   * then with follow=true each new chunk until the container ends or the client goes. The container
   * is checked (a pod with one may omit it); a pod not yet on a node has an empty log; a container
   * that has not started is a 400 "waiting to start" with its waiting reason.
   */
  #log(res: ServerResponse, pod: KubeObject, q: URLSearchParams) {
    const name = pod.metadata.name;
    const containers = [
      ...((pod.spec?.initContainers ?? []) as { name: string }[]),
      ...((pod.spec?.containers ?? []) as { name: string }[]),
    ].map((c) => c.name);
    let container = q.get('container') ?? '';
    if (container === '') {
      const main = ((pod.spec?.containers ?? []) as { name: string }[]).map((c) => c.name);
      if (main.length !== 1)
        throw badRequest(
          `a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]`,
        );
      container = main[0]!;
    } else if (!containers.includes(container)) {
      throw badRequest(`container ${container} is not valid for pod ${name}`);
    }
    const tailParam = q.get('tailLines');
    const tail = tailParam === null ? undefined : Number(tailParam);
    if (tail !== undefined && (!Number.isInteger(tail) || tail < 0))
      throw invalid({ ...RESOURCES.find((r) => r.kind === 'Pod')!, kind: 'PodLogOptions' }, name, [
        {
          reason: 'FieldValueInvalid',
          message: `Invalid value: ${tailParam}: must be greater than or equal to 0`,
          field: 'tailLines',
        },
      ]);
    const follow = q.get('follow') === 'true' || q.get('follow') === '1';
    if (!pod.spec?.nodeName) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end();
      return;
    }
    const source = this.hooks.podLog?.(pod, container);
    if (source === undefined) {
      const statuses = [
        ...((pod.status?.initContainerStatuses ?? []) as any[]),
        ...((pod.status?.containerStatuses ?? []) as any[]),
      ];
      const reason =
        statuses.find((c) => c.name === container)?.state?.waiting?.reason ?? 'ContainerCreating';
      throw badRequest(`container "${container}" in pod "${name}" is waiting to start: ${reason}`);
    }
    const text = source.text();
    let out = text;
    if (tail !== undefined) {
      const lines = text.split(/(?<=\n)/);
      out = tail === 0 ? '' : lines.slice(-tail).join('');
    }
    res.writeHead(200, {
      'content-type': 'text/plain',
      ...(follow ? { 'transfer-encoding': 'chunked' } : {}),
    });
    if (!follow) {
      res.end(out);
      return;
    }
    if (out !== '') res.write(out);
    res.flushHeaders();
    this.#watches.add(res);
    let sent = text.length;
    const timer = setInterval(() => {
      const now = source.text();
      if (now.length > sent) res.write(now.slice(sent));
      sent = now.length;
      if (source.ended()) res.end();
    }, 20);
    const stop = () => {
      clearInterval(timer);
      this.#watches.delete(res);
    };
    res.on('close', stop);
    res.on('finish', stop);
  }

  #watch(res: ServerResponse, rt: ResourceType, namespace: string | undefined, q: URLSearchParams) {
    const { labels, fields } = this.#selectors(rt, q);
    const matches = (o: KubeObject | undefined) =>
      o !== undefined &&
      (namespace === undefined || !rt.namespaced || o.metadata.namespace === namespace) &&
      matchRequirements(labels, o.metadata.labels) &&
      matchFields(fields, o);
    if (this.#failWatches > 0) {
      this.#failWatches--;
      throw internalError('etcdserver: request timed out');
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // Clients wait for the headers before they read events; send them before the first event.
    res.flushHeaders();
    this.#watches.add(res);
    this.watchStats.open = this.#watches.size;
    const write = (type: string, object: unknown) => {
      if (!res.writableEnded && !this.#silenced.has(res)) res.write(JSON.stringify({ type, object }) + '\n');
    };
    // Filtered watches turn changes that cross the selector into ADDED/DELETED, as the watch cache does.
    const send = (c: Change) => {
      if (c.rt !== rt) return;
      const now = c.type !== 'DELETED' && matches(c.object);
      const before = c.type !== 'ADDED' && matches(c.old);
      if (c.type === 'DELETED') {
        if (before) write('DELETED', c.object);
      } else if (now && before) write('MODIFIED', c.object);
      else if (now) write('ADDED', c.object);
      else if (before)
        write('DELETED', {
          ...c.old,
          metadata: { ...c.old!.metadata, resourceVersion: c.object.metadata.resourceVersion },
        });
    };
    const rvParam = q.get('resourceVersion') ?? '';
    const bookmarks = q.get('allowWatchBookmarks') === 'true';
    const bookmark = (annotations?: Record<string, string>) =>
      write('BOOKMARK', {
        kind: rt.kind,
        apiVersion: apiVersionOf(rt),
        metadata: { resourceVersion: this.reg.resourceVersion, ...(annotations ? { annotations } : {}) },
      });
    if (rvParam === '' || rvParam === '0' || q.get('sendInitialEvents') === 'true') {
      // "Get state and start at most recent": synthetic ADDED events for what exists now.
      for (const o of this.reg.list(rt, namespace)) if (matches(o)) write('ADDED', o);
      if (q.get('sendInitialEvents') === 'true' && bookmarks)
        bookmark({ 'k8s.io/initial-events-end': 'true' });
    } else {
      const rv = Number(rvParam);
      if (!Number.isInteger(rv)) throw badRequest(`invalid resource version: ${rvParam}`);
      const changes = this.reg.since(rv);
      if (changes === undefined) {
        this.watchStats.gone++;
        write('ERROR', gone(`too old resource version: ${rvParam} (${this.reg.compactedRv + 1})`).status);
        this.#watches.delete(res);
        res.end();
        return;
      }
      for (const c of changes) send(c);
    }
    const unsubscribe = this.reg.subscribe(send);
    const timers: NodeJS.Timeout[] = [];
    if (bookmarks) timers.push(setInterval(() => bookmark(), this.opts.bookmarkIntervalMs));
    const timeout = Number(q.get('timeoutSeconds') ?? 0);
    if (timeout > 0) timers.push(setTimeout(() => this.#silenced.has(res) || res.end(), timeout * 1000));
    const stop = () => {
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      this.#watches.delete(res);
      this.watchStats.open = this.#watches.size;
    };
    res.on('close', stop);
    res.on('finish', stop);
  }
}
