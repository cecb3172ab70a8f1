/** The Overview's counting, pure: what the cluster's status and replicas say, grouped as people read it. */
import type { ClusterStatus, NodeView, ReplicaView } from '../api.js';

type ClassCount = ClusterStatus['devices'][number];

export interface DeviceClassRow {
  class: string;
  /** The MIG profile (`3g.40gb`) of a MIG instance's class; absent for whole cards. */
  mig?: string;
  total: number;
  used: number;
  free: number;
  /** Free of replicas, but another process holds memory on them. */
  otherProcesses: number;
}

export interface CardGroup {
  /** The card's class: `a100-80g`. */
  card: string;
  /** Whole cards first, then each MIG profile: every one its own class. */
  rows: DeviceClassRow[];
  total: number;
  used: number;
  free: number;
}

// The catalog's naming (src/catalog/gpu-class.ts): CARD, or CARD-mig-PROFILE.
const migClass = /^(?<card>.+?)-mig-(?<profile>.+)$/;

/** Devices by class, grouped under their card's class; MIG instances stay classes of their own. */
export function deviceGroups(devices: readonly ClassCount[]): CardGroup[] {
  const groups = new Map<string, CardGroup>();
  for (const d of devices) {
    const m = migClass.exec(d.class)?.groups;
    const card = m?.['card'] ?? d.class;
    const row: DeviceClassRow = {
      class: d.class,
      ...(m?.['profile'] === undefined ? {} : { mig: m['profile'] }),
      total: d.total,
      used: d.used,
      free: d.free,
      otherProcesses: d.other_processes,
    };
    const g = groups.get(card) ?? { card, rows: [], total: 0, used: 0, free: 0 };
    g.rows.push(row);
    g.total += d.total;
    g.used += d.used;
    g.free += d.free;
    groups.set(card, g);
  }
  for (const g of groups.values()) {
    g.rows.sort((a, b) =>
      a.mig === undefined ? -1 : b.mig === undefined ? 1 : a.class.localeCompare(b.class),
    );
  }
  return [...groups.values()].sort((a, b) => a.card.localeCompare(b.card));
}

export interface NodeCounts {
  ready: number;
  notReady: { name: string; reason?: string; lastSeen: string }[];
}

export function nodeCounts(nodes: readonly NodeView[]): NodeCounts {
  return {
    ready: nodes.filter((n) => n.state === 'ready').length,
    notReady: nodes
      .filter((n) => n.state !== 'ready')
      .map((n) => ({
        name: n.name,
        lastSeen: n.last_seen,
        ...(n.reason === undefined ? {} : { reason: n.reason }),
      })),
  };
}

/** The order replicas are told in: on their way first, then serving, then needing attention. */
export const replicaStates = [
  'downloading',
  'starting',
  'ready',
  'degraded',
  'failed',
  'pending',
  'unknown',
] as const satisfies readonly ReplicaView['state'][];

export interface ReplicaLine {
  id: string | null;
  model: string;
  state: ReplicaView['state'];
  reason?: string;
  /** 0..1 while downloading. */
  progress?: number;
}

export interface ReplicaCounts {
  byState: { state: ReplicaView['state']; count: number }[];
  /** Replicas not ready, each with its reason: what an operator looks at. */
  notReady: ReplicaLine[];
}

export function replicaCounts(replicas: readonly ReplicaView[]): ReplicaCounts {
  const byState = replicaStates
    .map((state) => ({ state, count: replicas.filter((r) => r.state === state).length }))
    .filter((s) => s.count > 0);
  const notReady = replicas
    .filter((r) => r.state !== 'ready')
    .map((r): ReplicaLine => {
      const d = r.download;
      return {
        id: r.id,
        model: r.model,
        state: r.state,
        ...(r.reason === undefined ? {} : { reason: r.reason }),
        ...(d === undefined || d.total === 0 ? {} : { progress: Math.min(1, d.done / d.total) }),
      };
    });
  return { byState, notReady };
}
