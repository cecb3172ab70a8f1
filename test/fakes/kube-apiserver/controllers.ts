/**
 * The control loops a test cluster needs, simplified: the deployment and replica set controllers, the
 * LeaderWorkerSet controller, the scheduler and a kubelet that runs pods through a test's hook. Each pass
 * reconciles everything (a test cluster holds few objects) and is coalesced after registry changes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { deleteObject, type ServerHooks } from './server.js';
import { randomSuffix, type KubeObject, type OwnerReference, type Registry } from './registry.js';
import { RESOURCES, type ResourceType } from './resources.js';
import { selectorString } from './selectors.js';
import { schedule } from './scheduler.js';

const rt = (kind: string) => RESOURCES.find((r) => r.kind === kind)!;
const POD = rt('Pod');
const NODE = rt('Node');
const EVENT = rt('Event');
const DEPLOY = rt('Deployment');
const RS = rt('ReplicaSet');
const LWS = rt('LeaderWorkerSet');

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const LWS_PREFIX = 'leaderworkerset.sigs.k8s.io';

/** What a kubelet hook returns for a pod it started. */
export interface RunningPod {
  /** The pod's IP (e.g. 127.0.0.N, where a test's process listens). */
  ip: string;
  /** Fixed readiness; absent: the readinessProbe's httpGet decides (no probe: ready). */
  ready?: boolean;
  stop?: () => void | Promise<void>;
  /** Where a container port really listens, when a test cannot bind it (probes use it). */
  ports?: Record<number, number>;
  /**
   * What the container has written so far (`GET .../pods/NAME/log`, which slices it by tailLines);
   * read again while a client follows, so it may grow. Absent: an empty log.
   */
  logs?: (container: string) => string;
}

/**
 * What a kubelet hook returns for a pod whose containers cannot start, in the kubelet's words. mount: a
 * volume does not mount (FailedMount events; the containers wait in ContainerCreating). image: the engine's
 * image does not pull (a Failed event with the pull error, then ErrImagePull and ImagePullBackOff).
 */
export interface FailingPod {
  fails: 'mount' | 'image';
  /** `MountVolume.SetUp failed for volume "v" : secret "s" not found`, or the runtime's pull error. */
  message: string;
}

/** Starts a scheduled pod's containers (a test starts a real process); called once per pod. */
export type KubeletHook = (
  pod: KubeObject,
  node: KubeObject,
) => Promise<RunningPod | FailingPod | undefined> | RunningPod | FailingPod | undefined;

/** An admission check of a pod a controller creates: the refusal's words (`exceeded quota: ...`), or undefined. */
export type PodAdmission = (pod: KubeObject) => string | undefined;

export interface ControllerSwitches {
  deployments: boolean;
  leaderWorkerSets: boolean;
  scheduler: boolean;
  kubelet: boolean;
}

interface PodRuntime {
  running?: RunningPod;
  starting: boolean;
  ready: boolean;
  override?: boolean;
  timer?: NodeJS.Timeout;
  failures: number;
  /** The node stopped posting status: probes no longer count. */
  nodeDown?: boolean;
  stopped: boolean;
}

const isActive = (p: KubeObject) =>
  !p.metadata.deletionTimestamp && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';
const isReady = (p: KubeObject) =>
  ((p.status?.conditions ?? []) as any[]).some((c) => c.type === 'Ready' && c.status === 'True');
const ownedBy = (o: KubeObject, uid: string) =>
  o.metadata.ownerReferences?.some((r) => r.uid === uid) ?? false;
const controllerRef = (owner: KubeObject): OwnerReference => ({
  apiVersion: owner.apiVersion,
  kind: owner.kind,
  name: owner.metadata.name,
  uid: owner.metadata.uid,
  controller: true,
  blockOwnerDeletion: true,
});

/** The pod-template-hash: fnv-like, safe-encoded as the controller does (consonants and digits). */
export function templateHash(template: unknown): string {
  const digest = createHash('sha256').update(JSON.stringify(template)).digest();
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return Array.from(digest.subarray(0, 10), (b) => alphabet[b % alphabet.length]).join('');
}

function setCondition(
  conds: any[] | undefined,
  c: { type: string; status: string; reason?: string; message?: string },
) {
  const list = [...(conds ?? [])];
  const i = list.findIndex((x) => x.type === c.type);
  const old = i >= 0 ? list[i] : undefined;
  const transition = old && old.status === c.status ? old.lastTransitionTime : now();
  const next = { ...c, lastProbeTime: null, lastTransitionTime: transition };
  if (old && old.status === c.status && old.reason === c.reason && old.message === c.message) return list;
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

function intOrPercent(v: unknown, total: number, roundUp: boolean): number {
  if (typeof v === 'number') return v;
  const m = typeof v === 'string' ? /^(\d+)%$/.exec(v) : null;
  if (!m) return Number(v ?? 0) || 0;
  const x = (Number(m[1]) * total) / 100;
  return roundUp ? Math.ceil(x) : Math.floor(x);
}

export class Controllers {
  #pending = false;
  #again = false;
  #closed = false;
  #pods = new Map<string, PodRuntime>();
  #unsubscribe: () => void;
  #failedMessages = new Map<string, string>();
  /** Leaders (by uid) whose group has had all its pods. */
  #fullGroups = new Set<string>();
  #podIp = 0;

  readonly reg: Registry;
  readonly hooks: ServerHooks;
  /** Refuses the pods the controllers create (a ResourceQuota's or a webhook's refusal) while set. */
  admitPod: PodAdmission | undefined;
  readonly opts: { switches: ControllerSwitches; kubelet?: KubeletHook; probeScale: number };

  constructor(reg: Registry, hooks: ServerHooks, opts: Controllers['opts']) {
    this.reg = reg;
    this.hooks = hooks;
    this.opts = opts;
    this.admitPod = undefined;
    this.#unsubscribe = reg.subscribe((c) => {
      if (c.rt !== EVENT) this.kick();
    });
    hooks.terminatePod = (pod) => this.#terminate(pod);
    hooks.podLog = (pod, container) => {
      const r = this.#pods.get(pod.metadata.uid);
      const running = r?.running;
      if (r === undefined || running === undefined) return undefined;
      // Init containers ran to completion before the kubelet's hook started the pod.
      return { text: () => running.logs?.(container) ?? '', ended: () => r.stopped };
    };
  }

  kick() {
    if (this.#closed) return;
    if (this.#pending) {
      this.#again = true;
      return;
    }
    this.#pending = true;
    setImmediate(() => {
      this.#pending = false;
      this.#again = false;
      try {
        this.pass();
      } catch (e) {
        // A conflict with a concurrent writer: the next pass sees the new state.
        if (!(e instanceof Error && 'status' in e)) throw e;
      }
      // pass() may have set #again through the registry's listeners.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
      if (this.#again) this.kick();
    });
  }

  pass() {
    const s = this.opts.switches;
    if (s.deployments) {
      for (const d of this.reg.list(DEPLOY)) this.#deployment(d);
      for (const r of this.reg.list(RS)) this.#replicaSet(r);
      for (const d of this.reg.list(DEPLOY)) this.#deploymentStatus(d);
    }
    if (s.leaderWorkerSets) for (const l of this.reg.list(LWS)) this.#lws(l);
    if (s.scheduler) this.#schedule();
    if (s.kubelet) this.#kubelet();
    this.#podGc();
  }

  /** The pod garbage collector: pods bound to a node that no longer exists go. */
  #podGc() {
    for (const p of this.reg.list(POD)) {
      if (p.spec?.nodeName && !this.reg.get(NODE, undefined, p.spec.nodeName)) {
        deleteObject(
          this.reg,
          this.hooks,
          { rt: POD, namespace: p.metadata.namespace, name: p.metadata.name },
          { gracePeriodSeconds: 0 },
        );
      }
    }
  }

  /**
   * A node's kubelet stops posting status (ready=false), or comes back: the node lifecycle controller sets
   * Ready Unknown, taints it unreachable, and marks its pods not ready; pods stay (their toleration is 300 s).
   */
  setNodeReady(name: string, ready: boolean) {
    const unreachable = 'node.kubernetes.io/unreachable';
    this.reg.mutate(
      NODE,
      undefined,
      name,
      (n) => {
        n.status.conditions = setCondition(
          n.status.conditions,
          ready
            ? {
                type: 'Ready',
                status: 'True',
                reason: 'KubeletReady',
                message: 'kubelet is posting ready status',
              }
            : {
                type: 'Ready',
                status: 'Unknown',
                reason: 'NodeStatusUnknown',
                message: 'Kubelet stopped posting node status.',
              },
        ).map(({ lastProbeTime: _p, ...c }) => c);
      },
      'status',
    );
    this.reg.mutate(NODE, undefined, name, (n) => {
      n.spec ??= {};
      const taints = ((n.spec.taints ?? []) as any[]).filter((t) => t.key !== unreachable);
      if (!ready)
        taints.push({ key: unreachable, effect: 'NoSchedule' }, { key: unreachable, effect: 'NoExecute' });
      if (taints.length > 0) n.spec.taints = taints;
      else delete n.spec.taints;
    });
    for (const p of this.reg.list(POD)) {
      if (p.spec?.nodeName !== name || p.metadata.deletionTimestamp) continue;
      const r = this.#pods.get(p.metadata.uid);
      if (r) r.nodeDown = !ready;
      if (r?.running) this.#setStatus(p, { ready: !ready ? false : (r.override ?? r.ready) });
    }
  }

  async close() {
    this.#closed = true;
    this.#unsubscribe();
    const stops = [...this.#pods.values()].map(async (r) => {
      clearTimeout(r.timer);
      r.stopped = true;
      await r.running?.stop?.();
    });
    this.#pods.clear();
    await Promise.allSettled(stops);
  }

  /** Records an Event as a component would (repeats of the same one count up). */
  event(
    involved: KubeObject,
    e: { type: 'Normal' | 'Warning'; reason: string; message: string; component: string },
  ) {
    const ns = involved.metadata.namespace ?? 'default';
    const same = this.reg
      .list(EVENT, ns)
      .find(
        (x) =>
          x['involvedObject']?.uid === involved.metadata.uid &&
          x['reason'] === e.reason &&
          x['message'] === e.message,
      );
    if (same) {
      this.reg.mutate(EVENT, ns, same.metadata.name, (x) => {
        x['count'] = Number(x['count'] ?? 1) + 1;
        x['lastTimestamp'] = now();
      });
      return;
    }
    this.reg.create(
      EVENT,
      {
        metadata: { name: `${involved.metadata.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
        involvedObject: {
          kind: involved.kind,
          namespace: involved.metadata.namespace,
          name: involved.metadata.name,
          uid: involved.metadata.uid,
          apiVersion: involved.apiVersion,
          resourceVersion: involved.metadata.resourceVersion,
        },
        reason: e.reason,
        message: e.message,
        type: e.type,
        source: { component: e.component },
        firstTimestamp: now(),
        lastTimestamp: now(),
        count: 1,
        reportingComponent: e.component,
        reportingInstance: '',
      },
      { namespace: ns },
    );
  }

  /** Admission of a pod a controller creates: the API's 403 Forbidden in its words, or undefined. */
  #refusal(pod: KubeObject): string | undefined {
    const why = this.admitPod?.(pod);
    return why === undefined ? undefined : `pods "${pod.metadata.name}" is forbidden: ${why}`;
  }

  // --- Deployments and ReplicaSets -------------------------------------------------------------------

  #deployment(d: KubeObject) {
    if (d.metadata.deletionTimestamp || d.spec?.paused) return;
    const ns = d.metadata.namespace!;
    const replicas: number = d.spec.replicas ?? 1;
    const hash = templateHash(d.spec.template);
    const owned = this.reg.list(RS, ns).filter((r) => ownedBy(r, d.metadata.uid));
    let newRs = owned.find((r) => r.metadata.labels?.['pod-template-hash'] === hash);
    const olds = owned.filter((r) => r !== newRs);
    const revision = String(
      Math.max(
        0,
        ...owned.map((r) => Number(r.metadata.annotations?.['deployment.kubernetes.io/revision'] ?? 0)),
      ) + (newRs ? 0 : 1),
    );
    const oldPods = olds.reduce((n, r) => n + Number(r.spec.replicas ?? 0), 0);
    if (!newRs) {
      const labels = { ...d.spec.template?.metadata?.labels, 'pod-template-hash': hash };
      const template = structuredClone(d.spec.template ?? {});
      template.metadata = { ...template.metadata, labels };
      newRs = this.reg.create(
        RS,
        {
          metadata: {
            name: `${d.metadata.name}-${hash}`,
            namespace: ns,
            labels,
            annotations: {
              'deployment.kubernetes.io/desired-replicas': String(replicas),
              'deployment.kubernetes.io/max-replicas': String(replicas),
              'deployment.kubernetes.io/revision': revision,
            },
            ownerReferences: [controllerRef(d)],
          },
          spec: {
            replicas: 0,
            minReadySeconds: d.spec.minReadySeconds ?? 0,
            selector: {
              ...d.spec.selector,
              matchLabels: { ...d.spec.selector?.matchLabels, 'pod-template-hash': hash },
            },
            template,
          },
        },
        { namespace: ns },
      );
    }
    const setReplicas = (r: KubeObject, n: number) => {
      if (r.spec.replicas !== n) {
        this.reg.mutate(RS, ns, r.metadata.name, (x) => {
          x.spec.replicas = n;
          x.metadata.annotations = {
            ...x.metadata.annotations,
            'deployment.kubernetes.io/desired-replicas': String(replicas),
          };
        });
      }
    };
    if (d.spec.strategy?.type === 'Recreate') {
      for (const r of olds) setReplicas(r, 0);
      const oldRunning = olds.some((r) => this.reg.list(POD, ns).some((p) => ownedBy(p, r.metadata.uid)));
      if (!oldRunning) setReplicas(newRs, replicas);
      return;
    }
    // RollingUpdate: surge the new set within maxSurge, retire old pods while maxUnavailable allows.
    const ru = d.spec.strategy?.rollingUpdate ?? {};
    const surge = intOrPercent(ru.maxSurge ?? '25%', replicas, true);
    let unavailable = intOrPercent(ru.maxUnavailable ?? '25%', replicas, false);
    if (surge === 0 && unavailable === 0) unavailable = 1;
    if (olds.length === 0 || oldPods === 0) {
      setReplicas(newRs, replicas);
      for (const r of olds) setReplicas(r, 0);
      return;
    }
    const newCount: number = newRs.spec.replicas ?? 0;
    const room = replicas + surge - (newCount + oldPods);
    const newTarget = Math.min(replicas, newCount + Math.max(0, room));
    setReplicas(newRs, newTarget);
    // Then the deployment controller's two scale-down steps: old pods that are not ready first, then
    // ready ones while minAvailable (replicas - maxUnavailable) still holds.
    const pods = this.reg.list(POD, ns).filter(isActive);
    const readyOf = (r: KubeObject) => pods.filter((p) => ownedBy(p, r.metadata.uid) && isReady(p)).length;
    const minAvailable = replicas - unavailable;
    const sizes = new Map(olds.map((r) => [r, (r.spec.replicas ?? 0) as number]));
    const total = () => newTarget + [...sizes.values()].reduce((a, b) => a + b, 0);
    let budget = total() - minAvailable - (newTarget - readyOf(newRs));
    for (const r of olds) {
      if (budget <= 0) break;
      const cut = Math.min(budget, Math.max(0, sizes.get(r)! - readyOf(r)));
      sizes.set(r, sizes.get(r)! - cut);
      budget -= cut;
    }
    budget = olds.reduce((n, r) => n + Math.min(readyOf(r), sizes.get(r)!), readyOf(newRs)) - minAvailable;
    for (const r of olds) {
      if (budget <= 0) break;
      const cut = Math.min(budget, sizes.get(r)!);
      sizes.set(r, sizes.get(r)! - cut);
      budget -= cut;
    }
    for (const [r, n] of sizes) setReplicas(r, n);
  }

  #deploymentStatus(d: KubeObject) {
    const ns = d.metadata.namespace!;
    const hash = templateHash(d.spec.template);
    const sets = this.reg.list(RS, ns).filter((r) => ownedBy(r, d.metadata.uid));
    const pods = this.reg
      .list(POD, ns)
      .filter((p) => isActive(p) && sets.some((r) => ownedBy(p, r.metadata.uid)));
    const newRs = sets.find((r) => r.metadata.labels?.['pod-template-hash'] === hash);
    const replicas: number = d.spec.replicas ?? 1;
    const ready = pods.filter(isReady).length;
    const updated = newRs ? pods.filter((p) => ownedBy(p, newRs.metadata.uid)).length : 0;
    const maxUnavailable =
      d.spec.strategy?.type === 'Recreate'
        ? 0
        : intOrPercent(d.spec.strategy?.rollingUpdate?.maxUnavailable ?? '25%', replicas, false);
    const complete = updated === replicas && pods.length === replicas && ready === replicas;
    this.reg.mutate(
      DEPLOY,
      ns,
      d.metadata.name,
      (x) => {
        const st = x.status ?? {};
        st.observedGeneration = x.metadata.generation;
        st.replicas = pods.length;
        st.updatedReplicas = updated;
        st.readyReplicas = ready;
        st.availableReplicas = ready;
        st.unavailableReplicas = Math.max(0, pods.length - ready);
        for (const k of [
          'readyReplicas',
          'availableReplicas',
          'unavailableReplicas',
          'updatedReplicas',
          'replicas',
        ])
          if (st[k] === 0) Reflect.deleteProperty(st, k);
        let conds = setCondition(st.conditions, {
          type: 'Available',
          status: ready >= replicas - maxUnavailable ? 'True' : 'False',
          reason:
            ready >= replicas - maxUnavailable ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
          message:
            ready >= replicas - maxUnavailable
              ? 'Deployment has minimum availability.'
              : 'Deployment does not have minimum availability.',
        });
        conds = setCondition(conds, {
          type: 'Progressing',
          status: 'True',
          reason: complete ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated',
          message: complete
            ? `ReplicaSet "${newRs?.metadata.name ?? ''}" has successfully progressed.`
            : `ReplicaSet "${newRs?.metadata.name ?? ''}" is progressing.`,
        });
        // The deployment controller copies a ReplicaSet's ReplicaFailure (the new set's first), and drops it after.
        const failed = [newRs, ...sets]
          .map((r) => ((r?.status?.conditions ?? []) as any[]).find((c) => c.type === 'ReplicaFailure'))
          .find((c) => c !== undefined);
        conds = failed
          ? setCondition(conds, failed)
          : conds.filter((c: { type: string }) => c.type !== 'ReplicaFailure');
        st.conditions = conds.map(({ lastProbeTime: _p, ...c }) => ({
          ...c,
          lastUpdateTime: c.lastTransitionTime,
        }));
        x.status = st;
      },
      'status',
    );
  }

  #replicaSet(r: KubeObject) {
    const ns = r.metadata.namespace!;
    const pods = this.reg.list(POD, ns).filter((p) => ownedBy(p, r.metadata.uid));
    const active = pods.filter(isActive);
    const want: number = r.spec.replicas ?? 1;
    let failure: string | undefined;
    for (let i = active.length; i < want; i++) {
      const template = structuredClone(r.spec.template ?? {});
      const pod = {
        metadata: {
          ...template.metadata,
          name: `${r.metadata.name}-${randomSuffix(5)}`,
          generateName: `${r.metadata.name}-`,
          namespace: ns,
          ownerReferences: [controllerRef(r)],
        },
        spec: template.spec,
      };
      failure = this.#refusal(pod as KubeObject);
      if (failure !== undefined) {
        // The replica set controller's words: an event per refusal, and the ReplicaFailure condition.
        this.event(r, {
          type: 'Warning',
          reason: 'FailedCreate',
          message: `Error creating: ${failure}`,
          component: 'replicaset-controller',
        });
        break;
      }
      this.reg.create(POD, pod, { namespace: ns });
    }
    if (active.length > want) {
      // Delete the least useful first: unscheduled, then not ready, then the youngest.
      const rank = (p: KubeObject) => (p.spec?.nodeName ? 1 : 0) + (isReady(p) ? 2 : 0);
      const victims = [...active]
        .sort(
          (a, b) =>
            rank(a) - rank(b) || b.metadata.creationTimestamp.localeCompare(a.metadata.creationTimestamp),
        )
        .slice(0, active.length - want);
      for (const v of victims)
        deleteObject(this.reg, this.hooks, { rt: POD, namespace: ns, name: v.metadata.name });
    }
    const now_ = this.reg.list(POD, ns).filter((p) => ownedBy(p, r.metadata.uid) && isActive(p));
    this.reg.mutate(
      RS,
      ns,
      r.metadata.name,
      (x) => {
        const ready = now_.filter(isReady).length;
        const conditions = (
          failure === undefined
            ? ((x.status?.conditions ?? []) as any[]).filter((c) => c.type !== 'ReplicaFailure')
            : setCondition(x.status?.conditions, {
                type: 'ReplicaFailure',
                status: 'True',
                reason: 'FailedCreate',
                message: failure,
              })
        ).map(({ lastProbeTime: _p, ...c }) => c);
        x.status = {
          replicas: now_.length,
          fullyLabeledReplicas: now_.length,
          ...(ready ? { readyReplicas: ready, availableReplicas: ready } : {}),
          observedGeneration: x.metadata.generation,
          ...(conditions.length > 0 ? { conditions } : {}),
        };
      },
      'status',
    );
  }

  // --- LeaderWorkerSets ------------------------------------------------------------------------------

  #lws(l: KubeObject) {
    const ns = l.metadata.namespace!;
    const name = l.metadata.name;
    const replicas: number = l.spec.replicas ?? 1;
    const lwt = l.spec.leaderWorkerTemplate ?? {};
    const size: number = lwt.size ?? 1;
    const revision = templateHash(lwt).slice(0, 10);
    const pods = this.reg.list(POD, ns).filter((p) => ownedBy(p, l.metadata.uid));
    const groupOf = (p: KubeObject) => Number(p.metadata.labels?.[`${LWS_PREFIX}/group-index`] ?? -1);
    // Groups past the replica count, and groups whose template changed, go away whole.
    for (const p of pods) {
      const stale = p.metadata.labels?.[`${LWS_PREFIX}/template-revision-hash`] !== revision;
      if ((groupOf(p) >= replicas || stale) && this.reg.get(POD, ns, p.metadata.name)) {
        deleteObject(this.reg, this.hooks, { rt: POD, namespace: ns, name: p.metadata.name });
      }
    }
    let readyGroups = 0;
    let groups = 0;
    for (let i = 0; i < replicas; i++) {
      const leaderName = `${name}-${i}`;
      const members = this.reg.list(POD, ns).filter((p) => ownedBy(p, l.metadata.uid) && groupOf(p) === i);
      const leader = members.find((p) => p.metadata.name === leaderName);
      const recreate = lwt.restartPolicy !== 'None';
      if (
        recreate &&
        members.length > 0 &&
        members.some((p) => p.metadata.deletionTimestamp || p.status?.phase === 'Failed')
      ) {
        // RecreateGroupOnPodRestart: one pod gone means the whole group is recreated.
        for (const p of members)
          if (!p.metadata.deletionTimestamp)
            deleteObject(this.reg, this.hooks, { rt: POD, namespace: ns, name: p.metadata.name });
        continue;
      }
      // A worker gone from a group that had all its pods: RecreateGroupOnPodRestart restarts the group.
      const workersGone = leader && this.#fullGroups.has(leader.metadata.uid) && members.length < size;
      if (recreate && ((!leader && members.length > 0) || workersGone)) {
        for (const p of members)
          deleteObject(this.reg, this.hooks, { rt: POD, namespace: ns, name: p.metadata.name });
        continue;
      }
      const groupKey = createHash('sha1').update(`${ns}/${leaderName}`).digest('hex');
      const make = (j: number) => {
        const template = structuredClone(
          j === 0 ? (lwt.leaderTemplate ?? lwt.workerTemplate ?? {}) : (lwt.workerTemplate ?? {}),
        );
        const spec = template.spec ?? {};
        const env = [
          { name: 'LWS_LEADER_ADDRESS', value: `${leaderName}.${name}.${ns}` },
          { name: 'LWS_GROUP_SIZE', value: String(size) },
          { name: 'LWS_WORKER_INDEX', value: String(j) },
        ];
        for (const c of spec.containers ?? []) c.env = [...env, ...(c.env ?? [])];
        spec.hostname = j === 0 ? leaderName : `${leaderName}-${j}`;
        spec.subdomain = name;
        const pod = {
          metadata: {
            ...template.metadata,
            name: j === 0 ? leaderName : `${leaderName}-${j}`,
            namespace: ns,
            labels: {
              ...template.metadata?.labels,
              [`${LWS_PREFIX}/name`]: name,
              [`${LWS_PREFIX}/group-index`]: String(i),
              [`${LWS_PREFIX}/worker-index`]: String(j),
              [`${LWS_PREFIX}/group-key`]: groupKey,
              [`${LWS_PREFIX}/template-revision-hash`]: revision,
            },
            annotations: {
              ...template.metadata?.annotations,
              [`${LWS_PREFIX}/size`]: String(size),
              ...(j === 0 ? {} : { [`${LWS_PREFIX}/leader-name`]: leaderName }),
            },
            ownerReferences: [controllerRef(l)],
          },
          spec,
        };
        const refused = this.#refusal(pod as KubeObject);
        if (refused !== undefined) {
          // The LWS makes its pods through StatefulSets (the leaders' named after it, each group's workers'
          // after their leader): a refused pod is that StatefulSet's FailedCreate. The sets are not stored here.
          const set = j === 0 ? name : leaderName;
          const sts = {
            apiVersion: 'apps/v1',
            kind: 'StatefulSet',
            metadata: { name: set, namespace: ns, uid: `${l.metadata.uid}-${set}`, resourceVersion: '' },
          } as KubeObject;
          this.event(sts, {
            type: 'Warning',
            reason: 'FailedCreate',
            message: `create Pod ${pod.metadata.name} in StatefulSet ${set} failed error: ${refused}`,
            component: 'statefulset-controller',
          });
          return;
        }
        this.reg.create(POD, pod, { namespace: ns });
      };
      if (!leader) make(0);
      const leaderNow = this.reg.get(POD, ns, leaderName);
      // LeaderReady: workers wait for the leader to be ready; LeaderCreated: only for it to exist.
      if (l.spec.startupPolicy !== 'LeaderReady' || (leaderNow && isReady(leaderNow))) {
        for (let j = 1; j < size; j++) if (!this.reg.get(POD, ns, `${leaderName}-${j}`)) make(j);
      }
      const now_ = this.reg
        .list(POD, ns)
        .filter((p) => ownedBy(p, l.metadata.uid) && groupOf(p) === i && isActive(p));
      const leaderNow_ = now_.find((p) => p.metadata.name === leaderName);
      if (leaderNow_ && now_.length === size) this.#fullGroups.add(leaderNow_.metadata.uid);
      if (now_.some((p) => p.metadata.name === leaderName)) groups++;
      if (now_.length === size && now_.every(isReady)) readyGroups++;
    }
    this.reg.mutate(
      LWS,
      ns,
      name,
      (x) => {
        const st = x.status ?? {};
        st.replicas = groups;
        st.readyReplicas = readyGroups;
        st.updatedReplicas = groups;
        st.hpaPodSelector = selectorString({
          matchLabels: { [`${LWS_PREFIX}/name`]: name, [`${LWS_PREFIX}/worker-index`]: '0' },
        });
        for (const k of ['readyReplicas', 'updatedReplicas', 'replicas'])
          if (st[k] === 0) Reflect.deleteProperty(st, k);
        const available = readyGroups === replicas;
        st.conditions = setCondition(st.conditions, {
          type: 'Available',
          status: available ? 'True' : 'False',
          reason: 'AllGroupsReady',
          message: available ? 'All replicas are ready' : 'Not all replicas are ready',
        }).map(({ lastProbeTime: _p, ...c }) => c);
        x.status = st;
      },
      'status',
    );
  }

  // --- Scheduler -------------------------------------------------------------------------------------

  #schedule() {
    const nodes = this.reg.list(NODE);
    const pods = this.reg.list(POD);
    const podsOn = (node: string) => pods.filter((p) => p.spec?.nodeName === node && isActive(p));
    const pending = pods
      .filter(
        (p) =>
          !p.spec?.nodeName &&
          !p.metadata.deletionTimestamp &&
          (p.spec?.schedulerName ?? 'default-scheduler') === 'default-scheduler',
      )
      .sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
    for (const pod of pending) {
      const ns = pod.metadata.namespace!;
      const result = schedule(pod, nodes, podsOn);
      if ('node' in result) {
        // A Binding sets spec.nodeName; the scheduler then marks the pod scheduled.
        this.reg.mutate(POD, ns, pod.metadata.name, (x) => {
          x.spec.nodeName = result.node;
        });
        const bound = this.reg.mutate(
          POD,
          ns,
          pod.metadata.name,
          (x) => {
            x.status = {
              ...x.status,
              conditions: setCondition(x.status?.conditions, { type: 'PodScheduled', status: 'True' }),
            };
          },
          'status',
        );
        if (bound) {
          pods[pods.indexOf(pod)] = bound;
          this.#failedMessages.delete(pod.metadata.uid);
          this.event(bound, {
            type: 'Normal',
            reason: 'Scheduled',
            message: `Successfully assigned ${ns}/${pod.metadata.name} to ${result.node}`,
            component: 'default-scheduler',
          });
        }
        continue;
      }
      if (this.#failedMessages.get(pod.metadata.uid) === result.message) continue;
      this.#failedMessages.set(pod.metadata.uid, result.message);
      this.reg.mutate(
        POD,
        ns,
        pod.metadata.name,
        (x) => {
          x.status = {
            ...x.status,
            phase: 'Pending',
            conditions: setCondition(x.status?.conditions, {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: result.message,
            }),
          };
        },
        'status',
      );
      this.event(pod, {
        type: 'Warning',
        reason: 'FailedScheduling',
        message: result.message,
        component: 'default-scheduler',
      });
    }
  }

  // --- Kubelet ---------------------------------------------------------------------------------------

  #kubelet() {
    for (const pod of this.reg.list(POD)) {
      if (!pod.spec?.nodeName || pod.metadata.deletionTimestamp || this.#pods.has(pod.metadata.uid)) continue;
      const node = this.reg.get(NODE, undefined, pod.spec.nodeName);
      if (!node) continue;
      const rt_: PodRuntime = { starting: true, ready: false, failures: 0, stopped: false };
      this.#pods.set(pod.metadata.uid, rt_);
      void this.#start(pod, node, rt_);
    }
  }

  async #start(pod: KubeObject, node: KubeObject, r: PodRuntime) {
    let got: RunningPod | FailingPod | undefined;
    try {
      got = this.opts.kubelet ? await this.opts.kubelet(pod, node) : undefined;
    } catch (e) {
      this.#setStatus(pod, { error: e instanceof Error ? e.message : String(e) });
      return;
    }
    if (got !== undefined && 'fails' in got) {
      this.#failing(pod, got);
      return;
    }
    let running = got;
    running ??= { ip: `10.244.${Math.floor(++this.#podIp / 250)}.${(this.#podIp % 250) + 1}`, ready: true };
    r.running = running;
    r.starting = false;
    if (r.stopped) {
      await running.stop?.();
      return;
    }
    const probe = ((pod.spec?.containers ?? []) as any[]).find((c) => c.readinessProbe?.httpGet);
    r.ready = running.ready ?? !probe;
    this.#setStatus(pod, { ready: r.override ?? r.ready });
    if (running.ready === undefined && probe) this.#probeLoop(pod, probe, r);
  }

  #probeLoop(pod: KubeObject, container: any, r: PodRuntime) {
    const p = container.readinessProbe;
    const scale = this.opts.probeScale;
    const port =
      typeof p.httpGet.port === 'number'
        ? p.httpGet.port
        : Number(
            ((container.ports ?? []) as any[]).find((x) => x.name === p.httpGet.port)?.containerPort ??
              p.httpGet.port,
          );
    const tick = (delay: number) => {
      r.timer = setTimeout(() => {
        void probeHttp(
          p.httpGet.host ?? r.running!.ip,
          r.running?.ports?.[port] ?? port,
          p.httpGet.path ?? '/',
          (p.timeoutSeconds ?? 1) * 1000,
        ).then((ok) => {
          if (r.stopped) return;
          r.failures = ok ? 0 : r.failures + 1;
          const ready = ok ? true : r.failures >= (p.failureThreshold ?? 3) ? false : r.ready;
          if (ready !== r.ready) {
            r.ready = ready;
            if (r.override === undefined && !r.nodeDown) this.#setStatus(pod, { ready });
          }
          tick((p.periodSeconds ?? 10) * 1000 * scale);
        });
      }, delay);
    };
    tick((p.initialDelaySeconds ?? 0) * 1000 * scale);
  }

  #setStatus(pod: KubeObject, s: { ready?: boolean; error?: string }) {
    const r = this.#pods.get(pod.metadata.uid);
    const node = this.reg.get(NODE, undefined, pod.spec.nodeName);
    const hostIP =
      ((node?.status?.addresses ?? []) as any[]).find((a) => a.type === 'InternalIP')?.address ?? '127.0.0.1';
    this.reg.mutate(
      POD,
      pod.metadata.namespace,
      pod.metadata.name,
      (x) => {
        if (x.metadata.uid !== pod.metadata.uid) return;
        const st = x.status ?? {};
        const ready = s.ready === true;
        const started = st.startTime ?? now();
        st.hostIP = hostIP;
        st.hostIPs = [{ ip: hostIP }];
        st.startTime = started;
        if (s.error !== undefined) {
          st.phase = 'Pending';
          st.containerStatuses = ((x.spec.containers ?? []) as any[]).map((c) => ({
            name: c.name,
            image: c.image,
            imageID: '',
            ready: false,
            started: false,
            restartCount: 0,
            state: { waiting: { reason: 'CreateContainerError', message: s.error } },
            lastState: {},
          }));
        } else {
          st.phase = 'Running';
          st.podIP = r?.running?.ip;
          st.podIPs = [{ ip: r?.running?.ip }];
          const prev: any[] = st.containerStatuses ?? [];
          st.containerStatuses = ((x.spec.containers ?? []) as any[]).map((c) => {
            const old = prev.find((o) => o.name === c.name && o.state?.running);
            const before = prev.find((o) => o.name === c.name);
            return {
              name: c.name,
              image: c.image,
              imageID: `${c.image}@sha256:${createHash('sha256').update(String(c.image)).digest('hex')}`,
              containerID: old?.containerID ?? `containerd://${randomBytes(32).toString('hex')}`,
              ready,
              started: true,
              restartCount: before?.restartCount ?? 0,
              state: { running: { startedAt: old?.state.running.startedAt ?? now() } },
              lastState: before?.lastState ?? {},
            };
          });
          if (x.spec.initContainers?.length) {
            st.initContainerStatuses = ((x.spec.initContainers ?? []) as any[]).map((c) => ({
              name: c.name,
              image: c.image,
              ready: true,
              restartCount: 0,
              state: { terminated: { exitCode: 0, reason: 'Completed' } },
            }));
          }
        }
        let conds = setCondition(st.conditions, {
          type: 'PodReadyToStartContainers',
          status: s.error ? 'False' : 'True',
        });
        conds = setCondition(conds, { type: 'Initialized', status: 'True' });
        const why = ready
          ? {}
          : {
              reason: 'ContainersNotReady',
              message: `containers with unready status: [${((x.spec.containers ?? []) as any[]).map((c) => c.name).join(' ')}]`,
            };
        conds = setCondition(conds, { type: 'Ready', status: ready ? 'True' : 'False', ...why });
        conds = setCondition(conds, { type: 'ContainersReady', status: ready ? 'True' : 'False', ...why });
        st.conditions = setCondition(conds, { type: 'PodScheduled', status: 'True' });
        x.status = st;
      },
      'status',
    );
  }

  /** A pod the kubelet cannot start: its containers wait, and its events say why (as a real kubelet's). */
  #failing(pod: KubeObject, f: FailingPod) {
    const containers = (pod.spec?.containers ?? []) as any[];
    const image = String(containers[0]?.image ?? '');
    const waiting = (c: any, i: number) =>
      f.fails === 'mount' || i > 0
        ? { reason: 'ContainerCreating' }
        : { reason: 'ImagePullBackOff', message: `Back-off pulling image "${image}"` };
    this.reg.mutate(
      POD,
      pod.metadata.namespace,
      pod.metadata.name,
      (x) => {
        if (x.metadata.uid !== pod.metadata.uid) return;
        const st = x.status ?? {};
        st.phase = 'Pending';
        st.startTime ??= now();
        st.containerStatuses = containers.map((c, i) => ({
          name: c.name,
          image: c.image,
          imageID: '',
          ready: false,
          started: false,
          restartCount: 0,
          state: { waiting: waiting(c, i) },
          lastState: {},
        }));
        const why = {
          reason: 'ContainersNotReady',
          message: `containers with unready status: [${containers.map((c) => c.name).join(' ')}]`,
        };
        let conds = setCondition(st.conditions, {
          type: 'PodReadyToStartContainers',
          status: f.fails === 'mount' ? 'False' : 'True',
        });
        conds = setCondition(conds, { type: 'Initialized', status: 'True' });
        conds = setCondition(conds, { type: 'Ready', status: 'False', ...why });
        conds = setCondition(conds, { type: 'ContainersReady', status: 'False', ...why });
        st.conditions = setCondition(conds, { type: 'PodScheduled', status: 'True' });
        x.status = st;
      },
      'status',
    );
    const warn = (reason: string, message: string) =>
      this.event(pod, { type: 'Warning', reason, message, component: 'kubelet' });
    if (f.fails === 'mount') {
      warn('FailedMount', f.message);
      return;
    }
    warn('Failed', `Failed to pull image "${image}": ${f.message}`);
    warn('Failed', 'Error: ErrImagePull');
    warn('BackOff', `Back-off pulling image "${image}"`);
    warn('Failed', 'Error: ImagePullBackOff');
  }

  /**
   * The pod's first container exits and the kubelet backs off restarting it (CrashLoopBackOff), until
   * setPodReady(..., true) says it runs again.
   */
  crashPod(pod: KubeObject, exit: { exitCode?: number; reason?: string; message?: string } = {}) {
    const r = this.#pods.get(pod.metadata.uid);
    if (!r || r.starting)
      throw new Error(`pod ${pod.metadata.namespace ?? ''}/${pod.metadata.name} is not running yet`);
    r.override = false;
    this.#setStatus(pod, { ready: false });
    this.reg.mutate(
      POD,
      pod.metadata.namespace,
      pod.metadata.name,
      (x) => {
        const cs = x.status.containerStatuses?.[0];
        if (!cs) return;
        const startedAt = cs.state?.running?.startedAt ?? now();
        cs.lastState = {
          terminated: {
            exitCode: exit.exitCode ?? 1,
            reason: exit.reason ?? 'Error',
            ...(exit.message ? { message: exit.message } : {}),
            startedAt,
            finishedAt: now(),
            containerID: cs.containerID,
          },
        };
        cs.restartCount = Number(cs.restartCount ?? 0) + 1;
        cs.started = false;
        cs.state = {
          waiting: {
            reason: 'CrashLoopBackOff',
            message: `back-off 10s restarting failed container=${String(cs.name)} pod=${x.metadata.name}_${String(x.metadata.namespace)}(${x.metadata.uid})`,
          },
        };
      },
      'status',
    );
  }

  /** A test's override of a pod's readiness (probes stop deciding it). */
  setPodReady(pod: KubeObject, ready: boolean) {
    const r = this.#pods.get(pod.metadata.uid);
    if (!r || r.starting)
      throw new Error(`pod ${pod.metadata.namespace ?? ''}/${pod.metadata.name} is not running yet`);
    r.override = ready;
    this.#setStatus(pod, { ready });
  }

  async #terminate(pod: KubeObject) {
    const r = this.#pods.get(pod.metadata.uid);
    if (!r) return;
    this.#pods.delete(pod.metadata.uid);
    r.stopped = true;
    clearTimeout(r.timer);
    await r.running?.stop?.();
  }
}

/** One readiness probe: 200-399 within the timeout is a success, as the kubelet's HTTP prober counts it. */
function probeHttp(host: string, port: number, path: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      { host, port, path, timeout: timeoutMs, headers: { 'user-agent': 'kube-probe/1.33' } },
      (res) => {
        res.resume();
        resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

export type { ResourceType };
