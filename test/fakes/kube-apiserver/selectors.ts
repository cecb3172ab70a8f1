/**
 * Label and field selectors, parsed as the API server parses them
 * (k8s.io/apimachinery/pkg/labels and pkg/fields): `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
 * `a`, `!a`; fields only `=`, `==`, `!=`.
 */
import type { ResourceType } from './resources.js';

export type Requirement =
  | { key: string; op: 'in' | 'notin'; values: string[] }
  | { key: string; op: 'exists' | '!exists' }
  | { key: string; op: 'gt' | 'lt'; values: [string] };

export type Selector = (labels: Record<string, string> | undefined) => boolean;

/** Splits on commas outside parentheses. */
function splitTop(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

export class SelectorError extends Error {}

export function parseLabelSelector(s: string): Requirement[] {
  return splitTop(s).map((part) => {
    let m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(',').map((v) => v.trim());
      return { key: m[1]!, op: m[2] as 'in' | 'notin', values };
    }
    m = /^!\s*([\w./-]+)$/.exec(part);
    if (m) return { key: m[1]!, op: '!exists' };
    m = /^([\w./-]+)\s*(==|!=|=|>|<)\s*([\w./-]*)$/.exec(part);
    if (m) {
      const [, key = '', op, value = ''] = m;
      if (op === '!=') return { key, op: 'notin', values: [value] };
      if (op === '>' || op === '<') return { key, op: op === '>' ? 'gt' : 'lt', values: [value] };
      return { key, op: 'in', values: [value] };
    }
    m = /^([\w./-]+)$/.exec(part);
    if (m) return { key: m[1]!, op: 'exists' };
    throw new SelectorError(`unable to parse requirement: ${part}`);
  });
}

export function matchRequirements(reqs: Requirement[], labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return reqs.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'in':
        return has && r.values.includes(v!);
      case 'notin':
        return !has || !r.values.includes(v!);
      case 'exists':
        return has;
      case '!exists':
        return !has;
      case 'gt':
        return has && Number(v) > Number(r.values[0]);
      case 'lt':
        return has && Number(v) < Number(r.values[0]);
    }
  });
}

/** A metav1.LabelSelector ({matchLabels, matchExpressions}) as requirements. */
export function labelSelectorRequirements(sel: {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}): Requirement[] {
  const reqs: Requirement[] = Object.entries(sel.matchLabels ?? {}).map(([key, v]) => ({
    key,
    op: 'in',
    values: [v],
  }));
  for (const e of sel.matchExpressions ?? []) {
    const op = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: '!exists' }[e.operator];
    if (op === 'in' || op === 'notin') reqs.push({ key: e.key, op, values: e.values ?? [] });
    else if (op === 'exists' || op === '!exists') reqs.push({ key: e.key, op });
  }
  return reqs;
}

/** The selector as the string form a Scale's status.selector carries. */
export function selectorString(sel: Parameters<typeof labelSelectorRequirements>[0]): string {
  return labelSelectorRequirements(sel)
    .map((r) => {
      if (r.op === 'exists') return r.key;
      if (r.op === '!exists') return `!${r.key}`;
      if (r.op === 'in' && r.values.length === 1) return `${r.key}=${r.values[0]}`;
      if (r.op === 'in' || r.op === 'notin') return `${r.key} ${r.op} (${r.values.join(',')})`;
      return `${r.key}${r.op === 'gt' ? '>' : '<'}${'values' in r ? r.values[0] : ''}`;
    })
    .join(',');
}

// Field labels each kind supports (the real server refuses the others with 400).
const FIELDS: Record<string, string[]> = {
  Pod: [
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'spec.hostNetwork',
    'status.phase',
    'status.podIP',
    'status.nominatedNodeName',
  ],
  Event: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
  Secret: ['type'],
  Node: ['spec.unschedulable'],
  Namespace: ['status.phase'],
  ReplicaSet: ['status.replicas'],
};

export interface FieldRequirement {
  field: string;
  equal: boolean;
  value: string;
}

export function parseFieldSelector(s: string, rt: ResourceType): FieldRequirement[] {
  return splitTop(s).map((part) => {
    const m = /^([\w.]+)\s*(==|!=|=)\s*(.*)$/.exec(part);
    if (!m) throw new SelectorError(`invalid selector: '${s}'; can't understand '${part}'`);
    const [, field = '', op, value = ''] = m;
    if (!['metadata.name', 'metadata.namespace', ...(FIELDS[rt.kind] ?? [])].includes(field)) {
      throw new SelectorError(`field label not supported: ${field}`);
    }
    return { field, equal: op !== '!=', value };
  });
}

function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const k of path.split('.'))
    cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[k] : undefined;
  if (path === 'source' && cur && typeof cur === 'object')
    return (cur as { component?: string }).component ?? '';
  if (cur === undefined || cur === null)
    return path === 'spec.unschedulable' || path === 'spec.hostNetwork' ? 'false' : '';
  if (typeof cur === 'string') return cur;
  if (typeof cur === 'number' || typeof cur === 'boolean') return `${cur}`;
  return JSON.stringify(cur);
}

export function matchFields(reqs: FieldRequirement[], obj: unknown): boolean {
  return reqs.every((r) => (fieldValue(obj, r.field) === r.value) === r.equal);
}
