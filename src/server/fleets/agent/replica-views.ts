import { LlmgwError } from '../../../core/errors.js';
import { deviceLabel } from '../../../gpu/devices.js';
import type { Shard } from '../../../placement/types.js';
import { isContainerProfile } from '../../../catalog/model-spec.js';
import { engineFor } from '../../../engines/registry.js';
import type { EngineReport, ShardStatusWire } from '../../../protocol/agent-protocol.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { ReplicaView, ShardView } from '../../../protocol/replica-views.js';
import type { ReplicaRecord } from '../../../store/store.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import { replicaEndpoint } from '../endpoint.js';

import { aggregate } from './aggregate.js';
import { hostOf } from './node-host.js';
import type { Placed } from './placed.js';

/** What an agent last said of a shard (by `replica/rank`). */
export type StatusOf = (key: string) => ShardStatusWire | undefined;

/** What a node's agent last said of the engines it installs (by node id). */
export type EnginesOf = (nodeId: string) => EngineReport | undefined;

/** The answer for a replica id placement does not know. */
export function unknownReplica(id: string): LlmgwError {
  return new LlmgwError('not_found', `no replica is named "${id}" (llmgw ctl replicas lists them)`);
}

/**
 * The replicas as `ctl replicas` and the console show them: what placement placed, with what
 * each shard's agent last said of it, and the replicas not placed yet as pending with why.
 */
export class ReplicaViews {
  readonly #placed: Placed;
  readonly #registry: NodeRegistry;
  readonly #statusOf: StatusOf;
  readonly #enginesOf: EnginesOf;

  constructor(o: { placed: Placed; registry: NodeRegistry; statusOf: StatusOf; enginesOf?: EnginesOf }) {
    this.#placed = o.placed;
    this.#registry = o.registry;
    this.#statusOf = o.statusOf;
    this.#enginesOf = o.enginesOf ?? (() => undefined);
  }

  replicas(model?: string): ReplicaView[] {
    const views = this.#registry.views();
    const out = this.#placed.replicas
      .filter((r) => model === undefined || r.model === model)
      .map((r) => this.view(r, views));
    for (const p of this.#placed.pending) {
      if (model !== undefined && p.model !== model) continue;
      for (let i = 0; i < p.count; i++) {
        const spec = this.#placed.specOf(p.model);
        // A successor waits for room on its predecessor's profile: that one is known.
        const profile = spec?.profiles.find((x) => x.name === p.profile);
        out.push({
          id: null,
          model: p.model,
          profile: profile?.name ?? null,
          engine: (profile ?? spec?.profiles[0])?.engine ?? null,
          state: 'pending',
          reason: p.reason,
          restarts: 0,
          shards: [],
        });
      }
    }
    return out;
  }

  replica(id: string): ReplicaView {
    const r = this.#placed.replica(id);
    if (r === undefined) throw unknownReplica(id);
    return this.view(r, this.#registry.views());
  }

  shardView(s: Shard, node: NodeView | undefined): ShardView {
    return shardView(s, this.#statusOf(`${s.replica}/${s.rank}`), node);
  }

  view(r: ReplicaRecord, views: readonly NodeView[]): ReplicaView {
    const placed = this.#placed.shards;
    const shards = placed
      .filter((s) => s.replica === r.id)
      .map((s) =>
        this.shardView(
          s,
          views.find((v) => v.name === s.node),
        ),
      );
    const { state, reason, download, restart_at } = aggregate(shards);
    const head = placed.find((s) => s.replica === r.id && s.rank === 0);
    const headNode = views.find((v) => v.name === head?.node);
    const profile = r.spec.profiles.find((p) => p.name === r.profile);
    // A process shard of an engine the agent installs runs its node's binary: say which, and why.
    const engine = profile === undefined ? undefined : engineFor(profile.engine);
    if (profile !== undefined && engine?.installedByAgent === true && !isContainerProfile(profile))
      for (const s of shards) {
        const node = views.find((v) => v.name === s.node);
        const report =
          node === undefined ? undefined : this.#enginesOf(node.id)?.[engine.name as keyof EngineReport];
        if (report?.source !== undefined && report.why !== undefined)
          s.engine_bin = {
            source: report.source,
            ...(report.bin === undefined ? {} : { path: report.bin }),
            why: report.why,
          };
      }
    const readySince = shards
      .map((s) => s.ready_since)
      .filter((x): x is string => x !== undefined)
      .sort()
      .at(-1);
    const endpoint =
      head !== undefined && headNode !== undefined && (state === 'ready' || state === 'degraded')
        ? replicaEndpoint({ replica: r.id, host: hostOf(headNode.address), port: head.port, node: headNode })
        : undefined;
    return {
      id: r.id,
      model: r.model,
      profile: r.profile,
      engine: profile?.engine ?? null,
      state,
      ...(reason === undefined ? {} : { reason: r.retiring ? `${reason}; being replaced` : reason }),
      ...(r.retiring && reason === undefined
        ? { reason: `being replaced (${r.retire_reason ?? 'restart'}): it stops once its successor is ready` }
        : {}),
      ...(restart_at === undefined ? {} : { restart_at }),
      ...(download === undefined ? {} : { download }),
      ...(head === undefined ? {} : { node: head.node }),
      ...(readySince === undefined || state !== 'ready' ? {} : { ready_since: readySince }),
      restarts: shards.reduce((n, s) => n + s.restarts, 0),
      ...(endpoint === undefined ? {} : { endpoint }),
      ...(r.retiring ? { retiring: true } : {}),
      created_at: r.created_at,
      shards,
    };
  }
}

/** A shard as its node and its agent last said: unknown while the node is not ready. */
function shardView(s: Shard, reported: ShardStatusWire | undefined, node: NodeView | undefined): ShardView {
  const base = {
    rank: s.rank,
    node: s.node,
    devices: s.devices.map(deviceLabel),
    port: s.port,
    ...(s.threads === undefined ? {} : { threads: s.threads }),
  };
  if (node?.state !== 'ready') {
    return {
      ...base,
      state: 'unknown',
      reason: `node ${s.node} is not ready${node?.reason === undefined ? '' : ` (${node.reason})`}`,
      restarts: reported?.restarts ?? 0,
    };
  }
  if (reported === undefined)
    return { ...base, state: 'starting', reason: `waiting for node ${s.node} to start it`, restarts: 0 };
  return {
    ...base,
    state: reported.state,
    ...(reported.reason === undefined ? {} : { reason: reported.reason }),
    ...(reported.restart_at === undefined ? {} : { restart_at: reported.restart_at }),
    ...(reported.download === undefined || reported.state !== 'downloading'
      ? {}
      : { download: reported.download }),
    ...(reported.pid === undefined ? {} : { pid: reported.pid }),
    restarts: reported.restarts,
    ...(reported.ready_since === undefined ? {} : { ready_since: reported.ready_since }),
    ...(reported.last_exit === undefined ? {} : { last_exit: reported.last_exit }),
  };
}
