import type { Device, DiscoveryMethod, ExcludedCard, HostInfo } from '../gpu/types.js';

import type { NodeDownload } from './cache-views.js';

/** How the API shows nodes and the cluster; shared by the server and its clients. */

export type NodeState = 'ready' | 'not_ready';

export interface NodeView {
  id: string;
  name: string;
  state: NodeState;
  /** Why a node is not ready. */
  reason?: string;
  /** When the control plane last heard from it. */
  last_seen: string;
  address: string;
  /** Its engine proxy (TLS), when it runs one: gateways on other machines reach its engines there. */
  engine_proxy?: { port: number };
  agent_version: string;
  joined_at: string;
  host: HostInfo;
  discovery: { method: DiscoveryMethod; reasons: string[] };
  driver_version?: string;
  cuda_version?: string;
  devices: Device[];
  excluded: ExcludedCard[];
  devices_by_class: Record<string, number>;
  /** Devices replicas are placed on, by class. */
  devices_in_use_by_class: Record<string, number>;
}

export interface ClassCount {
  class: string;
  total: number;
  /** Placed replicas use them. */
  used: number;
  /** Not used by a replica. */
  free: number;
  /** Free of replicas but holding another process's memory (something llmgw did not start). */
  other_processes: number;
}

export interface ClusterStatus {
  nodes: { total: number; ready: number; not_ready: number };
  devices: ClassCount[];
  /** Cards offering no device, by reason. */
  excluded: { node: string; card: number; reason: string }[];
  cpus: number;
  memory_mib: { total: number; free: number };
  /** The control planes serving on this store, the leader first (absent from older control planes). */
  control_planes?: ControlPlaneView[];
  /** Model files being fetched onto nodes now (for replicas, or `ctl model pull`); absent when none is. */
  downloads?: NodeDownload[];
}

export interface ControlPlaneView {
  id: string;
  url: string;
  version: string;
  started_at: string;
  seen_at: string;
  /** Silent for longer than three leases: stopped or cut off (a clean stop removes it). */
  state: 'serving' | 'silent';
  leader: boolean;
  /** The leader's: since when it leads, and its term (the lease's fencing token). */
  leader_since?: string;
  term?: number;
  /** The one that answered this request. */
  self: boolean;
}

export interface JoinTokenView {
  name: string;
  prefix: string;
  created_at: string;
  created_by: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  uses: number;
}

export interface CreatedJoinToken {
  token: JoinTokenView;
  /** Shown once. */
  secret: string;
}
