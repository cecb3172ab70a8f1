import type { Logger } from 'pino';

import { messageOf } from '../../../core/errors.js';
import { defaultHubEndpoint, type HubAccess } from '../../../models/hub.js';
import type {
  AssignedShard,
  EngineSettingsWire,
  WeightsSettingsWire,
} from '../../../protocol/agent-protocol.js';
import type { AgentHub } from '../../nodes/agent-hub.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import type { SettingsHolder } from '../../state/settings-holder.js';

import { hostOf } from './node-host.js';
import type { Placed } from './placed.js';
import type { ReplicaKeys } from './replica-keys.js';

export interface AssignmentsOptions {
  registry: NodeRegistry;
  hub: AgentHub;
  settings: SettingsHolder;
  logger: Logger;
  placed: Placed;
  keys: ReplicaKeys;
  /** The hub agents fetch from when the mirror is off (hub.endpoint, hub.token). */
  hubAccess?: (() => HubAccess) | undefined;
}

/** Tells each connected agent every shard its node should run, with the engines' and the weights' settings. */
export class Assignments {
  readonly #o: AssignmentsOptions;
  /** What each node was last told, by node id: told again only when it changes. */
  readonly #assigned = new Map<string, string>();

  constructor(o: AssignmentsOptions) {
    this.#o = o;
  }

  /** Its agent (re)connected or left: the next push tells it everything again. */
  forget(nodeId: string): void {
    this.#assigned.delete(nodeId);
  }

  pushAll(): void {
    const registry = this.#o.registry;
    for (const v of registry.views()) if (registry.isConnected(v.id)) this.push(v.id);
  }

  /** Tells a node's agent every shard it should run, when that changed (or it just connected). */
  push(nodeId: string): void {
    const { registry, placed, keys } = this.#o;
    const node = registry.brief({ id: nodeId });
    if (node === undefined) return;
    const shards: AssignedShard[] = [];
    for (const s of placed.shards.filter((x) => x.node === node.name)) {
      const r = placed.replica(s.replica);
      const apiKey = r === undefined ? undefined : keys.keyOf(r);
      if (r === undefined || apiKey === undefined) continue;
      const head =
        s.ranks > 1 ? placed.shards.find((x) => x.replica === s.replica && x.rank === 0) : undefined;
      const headNode = head === undefined ? undefined : registry.brief({ name: head.node });
      const origin = placed.origins.get(r.spec.source);
      shards.push({
        replica: s.replica,
        model: r.spec,
        profile: s.profile,
        rank: s.rank,
        ranks: s.ranks,
        port: s.port,
        ...(s.dist_port === undefined ? {} : { dist_port: s.dist_port }),
        ...(head?.dist_port !== undefined && headNode !== undefined
          ? { head: { address: hostOf(headNode.address), port: head.dist_port } }
          : {}),
        devices: s.devices,
        ...(s.threads === undefined ? {} : { threads: s.threads }),
        ...(s.memory_mib === undefined ? {} : { memory_mib: s.memory_mib }),
        api_key: apiKey,
        ...(origin === undefined ? {} : { origin }),
      });
    }
    const [first, last] = this.#o.settings.current.settings.placement.ports.split('-').map(Number) as [
      number,
      number,
    ];
    const message = {
      type: 'assign' as const,
      shards,
      engines: this.#engineSettings(),
      ports: { first, last },
      weights: this.#weightsSettings(),
    };
    const text = JSON.stringify(message);
    if (this.#assigned.get(nodeId) === text) return;
    if (this.#o.hub.send(nodeId, message)) this.#assigned.set(nodeId, text);
  }

  /** Where agents fetch model files: the mirror, or the hub itself (then, and only then, with the token). */
  #weightsSettings(): WeightsSettingsWire {
    const settings = this.#o.settings.current.settings;
    let hub: HubAccess = { endpoint: defaultHubEndpoint };
    try {
      hub = this.#o.hubAccess?.() ?? hub;
    } catch (e) {
      // A bad HF_ENDPOINT was refused where models are resolved; agents are told the default here.
      this.#o.logger.warn({ err: messageOf(e) }, 'hub.endpoint could not be read');
    }
    const mirror = settings.mirror.enabled;
    return {
      mirror,
      hub_endpoint: hub.endpoint,
      ...(mirror || hub.token === undefined ? {} : { hub_token: hub.token }),
      catalog_blobs: this.#o.placed.catalogBlobs,
    };
  }

  #engineSettings(): EngineSettingsWire {
    const a = this.#o.settings.current.settings.agent;
    return { ...a.engines, stop_grace_s: a.stop_grace_s };
  }
}
