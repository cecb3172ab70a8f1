import type { KNode, KPod } from './kube-types.js';

import { migClass, parseGpuClass } from '../catalog/gpu-class.js';
import { cardClass } from '../gpu/classes.js';
import type { Device } from '../gpu/types.js';
import type { NodeView } from '../protocol/node-views.js';

import { countOf, mibOf } from './quantity.js';

/**
 * Kubernetes nodes as llmgw's node views: their devices read from what the NVIDIA device
 * plugin makes allocatable (`nvidia.com/gpu`, and with the mixed MIG strategy
 * `nvidia.com/mig-<profile>`) and named by the GPU feature discovery labels, with the same
 * card-name mapping the agents' discovery uses (src/gpu/classes.ts), so a profile's
 * gpu_class means the same card on bare nodes and in a cluster.
 */

export const gpuResource = 'nvidia.com/gpu';
export const migResourcePrefix = 'nvidia.com/mig-';
export const productLabel = 'nvidia.com/gpu.product';
export const memoryLabel = 'nvidia.com/gpu.memory';

/** `NVIDIA-H100-80GB-HBM3` with 81559 MiB: `h100-80g`; undefined without the product label. */
export function classOfLabels(labels: Record<string, string> | undefined): string | undefined {
  const product = labels?.[productLabel];
  if (product === undefined || product === '') return undefined;
  // The single MIG strategy names the instance in the product (`…-80GB-MIG-1g.10gb`): the card decides.
  const card = product.replace(/-MIG-.*$/i, '');
  return cardClass(card.replace(/-/g, ' '), Number(labels?.[memoryLabel] ?? 0));
}

/** A device class and how many of it a node offers, from its allocatable resources. */
export interface ClassOffer {
  class: string;
  /** The resource a pod requests for one of them. */
  resource: string;
  count: number;
  mig?: string;
}

/** What a node offers llmgw, by class: whole cards, and each MIG profile the device plugin advertises. */
export function offersOf(node: Pick<KNode, 'metadata' | 'status'>): ClassOffer[] {
  const card = classOfLabels(node.metadata?.labels);
  const allocatable = node.status?.allocatable ?? {};
  const out: ClassOffer[] = [];
  const cards = countOf(allocatable[gpuResource]);
  if (cards > 0) out.push({ class: card ?? 'gpu-0g', resource: gpuResource, count: cards });
  for (const [resource, value] of Object.entries(allocatable).sort(([a], [b]) => a.localeCompare(b))) {
    if (!resource.startsWith(migResourcePrefix)) continue;
    const profile = resource.slice(migResourcePrefix.length);
    const count = countOf(value);
    if (count > 0 && card !== undefined)
      out.push({ class: migClass(card, profile), resource, count, mig: profile });
  }
  return out;
}

/** The resource a pod of this class requests, and how many: whole cards by count, one MIG device. */
export function resourceOf(gpuClass: string, gpusPerNode: number): { resource: string; count: number } {
  const parsed = parseGpuClass(gpuClass);
  if (parsed?.migProfile !== undefined)
    return { resource: `${migResourcePrefix}${parsed.migProfile}`, count: 1 };
  return { resource: gpuResource, count: gpusPerNode };
}

/** What the pods on a node request of each GPU resource (those not finished). */
export function requestedOn(nodeName: string, pods: readonly KPod[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const pod of pods) {
    if (pod.spec?.nodeName !== nodeName) continue;
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') continue;
    for (const c of pod.spec.containers) {
      for (const [resource, value] of Object.entries(c.resources?.requests ?? c.resources?.limits ?? {})) {
        if (resource !== gpuResource && !resource.startsWith(migResourcePrefix)) continue;
        out.set(resource, (out.get(resource) ?? 0) + countOf(value));
      }
    }
  }
  return out;
}

/** A Kubernetes node as llmgw shows nodes; `pods` are llmgw's, for what its replicas use there. */
export function kubeNodeView(node: KNode, pods: readonly KPod[]): NodeView {
  const name = node.metadata?.name ?? '';
  const labels = node.metadata?.labels ?? {};
  const memoryMib = Number(labels[memoryLabel] ?? 0);
  const requested = requestedOn(name, pods);
  const devices: Device[] = [];
  const byClass: Record<string, number> = {};
  const usedByClass: Record<string, number> = {};
  for (const offer of offersOf(node)) {
    byClass[offer.class] = offer.count;
    const used = Math.min(requested.get(offer.resource) ?? 0, offer.count);
    if (used > 0) usedByClass[offer.class] = used;
    for (let i = 0; i < offer.count; i++) {
      const mig = offer.mig;
      devices.push({
        id: mig === undefined ? i : 1000 + devices.length,
        label: mig === undefined ? String(i) : `mig-${mig}/${i}`,
        class: offer.class,
        card: mig === undefined ? i : -1,
        // The device plugin picks the device: llmgw never knows its UUID here.
        uuid: '',
        memory_total_mib: mig === undefined ? memoryMib : migMemoryMib(mig),
        memory_used_mib: 0,
        wear: {},
        processes: [],
      });
    }
  }
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  const notReady =
    node.spec?.unschedulable === true
      ? `cordoned: no new pods are scheduled here (kubectl uncordon ${name})`
      : ready?.status === 'True'
        ? undefined
        : `the kubelet says: ${ready?.message ?? ready?.reason ?? 'not ready'}`;
  const info = node.status?.nodeInfo;
  const allocatable = node.status?.allocatable ?? {};
  const address =
    node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address ??
    node.status?.addresses?.[0]?.address ??
    '';
  const created = node.metadata?.creationTimestamp;
  const createdAt = created === undefined ? new Date(0).toISOString() : new Date(created).toISOString();
  const memory = mibOf(allocatable['memory']);
  return {
    id: node.metadata?.uid ?? name,
    name,
    state: notReady === undefined ? 'ready' : 'not_ready',
    ...(notReady === undefined ? {} : { reason: notReady }),
    last_seen: new Date(ready?.lastHeartbeatTime ?? Date.now()).toISOString(),
    address,
    agent_version: `kubernetes ${info?.kubeletVersion ?? ''}`.trim(),
    joined_at: createdAt,
    host: {
      hostname: name,
      os: info?.osImage ?? '',
      arch: info?.architecture ?? '',
      cpus: { count: countOf(allocatable['cpu']), model: '' },
      memory: { total_mib: memory, free_mib: memory },
      disk: { path: '', total_mib: mibOf(allocatable['ephemeral-storage']), free_mib: 0 },
    },
    discovery: {
      method: 'none',
      reasons: ['a Kubernetes node: devices from its allocatable resources and GPU feature discovery labels'],
    },
    ...(labels['nvidia.com/cuda.driver-version.full'] === undefined
      ? {}
      : { driver_version: labels['nvidia.com/cuda.driver-version.full'] }),
    devices,
    excluded: [],
    devices_by_class: byClass,
    devices_in_use_by_class: usedByClass,
  };
}

/** `3g.40gb`: 40 GB in MiB (what the profile's name says). */
function migMemoryMib(profile: string): number {
  const gb = /(\d+)gb/.exec(profile)?.[1];
  return gb === undefined ? 0 : Number(gb) * 1024;
}
