/**
 * The default scheduler's filters, in its order (NodeUnschedulable, TaintToleration, NodeAffinity,
 * NodeResourcesFit), and its FitError message: "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, ...".
 */
import { parseQuantity } from './quantity.js';
import type { KubeObject } from './registry.js';

type Reason = string;

/** A pod's requests: the sum of its containers', or an init container's if larger, as the scheduler adds them. */
export function podRequests(pod: KubeObject): Map<string, number> {
  const out = new Map<string, number>();
  const add = (m: Map<string, number>, res: Record<string, unknown> | undefined) => {
    for (const [k, v] of Object.entries(res ?? {})) m.set(k, (m.get(k) ?? 0) + (parseQuantity(v) ?? 0));
  };
  const reqs = (c: any) => ({ ...c.resources?.limits, ...c.resources?.requests }) as Record<string, unknown>;
  for (const c of pod.spec?.containers ?? []) add(out, reqs(c));
  for (const c of pod.spec?.initContainers ?? []) {
    const one = new Map<string, number>();
    add(one, reqs(c));
    for (const [k, v] of one) if (v > (out.get(k) ?? 0)) out.set(k, v);
  }
  return out;
}

function matchExpression(
  e: { key: string; operator: string; values?: string[] },
  labels: Record<string, string>,
): boolean {
  const has = Object.hasOwn(labels, e.key);
  const v = labels[e.key];
  const vals = e.values ?? [];
  switch (e.operator) {
    case 'In':
      return has && vals.includes(v!);
    case 'NotIn':
      return !has || !vals.includes(v!);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'Gt':
      return has && Number(v) > Number(vals[0]);
    case 'Lt':
      return has && Number(v) < Number(vals[0]);
    default:
      return false;
  }
}

export function nodeMatchesAffinity(pod: KubeObject, node: KubeObject): boolean {
  const labels: Record<string, string> = node.metadata.labels ?? {};
  for (const [k, v] of Object.entries((pod.spec?.nodeSelector ?? {}) as Record<string, string>))
    if (labels[k] !== v) return false;
  const terms: any[] | undefined =
    pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms || terms.length === 0) return true;
  // Terms are ORed; a term's expressions are ANDed; an empty term matches nothing.
  return terms.some((t) => {
    const exprs: any[] = t.matchExpressions ?? [];
    const fields: any[] = t.matchFields ?? [];
    if (exprs.length === 0 && fields.length === 0) return false;
    return (
      exprs.every((e) => matchExpression(e, labels)) &&
      fields.every((e) => matchExpression(e, { 'metadata.name': node.metadata.name }))
    );
  });
}

function tolerates(tolerations: any[], taint: { key: string; value?: string; effect: string }): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === 'Exists') return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
  });
}

/** Why the node cannot take the pod (several reasons for several missing resources), or [] when it can. */
export function filterNode(pod: KubeObject, node: KubeObject, podsOnNode: KubeObject[]): Reason[] {
  if (node.spec?.unschedulable) return ['node(s) were unschedulable'];
  const taint = ((node.spec?.taints ?? []) as any[]).find(
    (t) =>
      (t.effect === 'NoSchedule' || t.effect === 'NoExecute') && !tolerates(pod.spec?.tolerations ?? [], t),
  );
  if (taint) return [`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`];
  if (!nodeMatchesAffinity(pod, node)) return ["node(s) didn't match Pod's node affinity/selector"];
  const alloc: Record<string, unknown> = node.status?.allocatable ?? {};
  const maxPods = parseQuantity(alloc['pods'] ?? '110') ?? 110;
  if (podsOnNode.length + 1 > maxPods) return ['Too many pods'];
  const used = new Map<string, number>();
  for (const p of podsOnNode) for (const [k, v] of podRequests(p)) used.set(k, (used.get(k) ?? 0) + v);
  const reasons: Reason[] = [];
  for (const [k, v] of podRequests(pod)) {
    if (v === 0) continue;
    const have = parseQuantity(alloc[k]) ?? 0;
    if ((used.get(k) ?? 0) + v > have + 1e-9) reasons.push(`Insufficient ${k}`);
  }
  return reasons;
}

/** The FitError message for a pod no node takes. */
export function fitError(perNode: Reason[][]): string {
  const n = perNode.length;
  if (n === 0) return 'no nodes available to schedule pods';
  const counts = new Map<string, number>();
  let resourceOnly = 0;
  for (const reasons of perNode) {
    for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
    if (reasons.every((r) => r.startsWith('Insufficient ') || r === 'Too many pods')) resourceOnly++;
  }
  const list = (m: Map<string, number>) =>
    [...m]
      .map(([r, c]) => `${c} ${r}`)
      .sort()
      .join(', ');
  // Preemption: nodes refused for resources could be freed by evicting lower-priority pods (none here);
  // the others cannot be helped by preemption.
  const pre = new Map<string, number>();
  if (resourceOnly > 0) pre.set('No preemption victims found for incoming pod', resourceOnly);
  if (n - resourceOnly > 0) pre.set('Preemption is not helpful for scheduling', n - resourceOnly);
  return `0/${n} nodes are available: ${list(counts)}. preemption: 0/${n} nodes are available: ${list(pre)}.`;
}

/** The node the scheduler picks (the least allocated of those that fit), or the FitError message. */
export function schedule(
  pod: KubeObject,
  nodes: KubeObject[],
  podsOn: (node: string) => KubeObject[],
): { node: string } | { message: string } {
  const fits: { name: string; score: number }[] = [];
  const failures: Reason[][] = [];
  for (const node of nodes) {
    const on = podsOn(node.metadata.name);
    const reasons = filterNode(pod, node, on);
    if (reasons.length === 0) fits.push({ name: node.metadata.name, score: on.length });
    else failures.push(reasons);
  }
  if (fits.length > 0) {
    fits.sort((a, b) => a.score - b.score || a.name.localeCompare(b.name));
    return { node: fits[0]!.name };
  }
  return { message: fitError(failures) };
}
