import { stringify } from 'yaml';

import { LlmgwError } from '../../core/errors.js';
import type { ModelManifests } from '../../protocol/model-views.js';
import { stringOpt } from '../command.js';
import type { Output } from '../output.js';
import { UsageError } from '../usage-error.js';

/** `-o yaml|json`, as kubectl's: the objects themselves, for review or for Git. */
export type ObjectsFormat = 'yaml' | 'json';

export function objectsFormat(opts: Record<string, unknown>): ObjectsFormat | undefined {
  const o = stringOpt(opts, 'output');
  if (o === undefined || o === 'yaml' || o === 'json') return o;
  throw new UsageError(`-o is yaml or json (the objects as Kubernetes reads them), not "${o}"`);
}

/**
 * Prints the objects of an answer in `format`: YAML documents separated by `---`, or a
 * Kubernetes List in JSON. Where engines run on agents there are none: refused with why.
 */
export function printObjects(o: Output, m: ModelManifests, format: ObjectsFormat): void {
  if (m.objects === null)
    throw new LlmgwError('precondition_failed', m.note ?? 'this control plane writes no Kubernetes objects');
  if (format === 'json') {
    o.out(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: m.objects }, null, 2));
    return;
  }
  o.out(m.objects.map((x) => stringify(x, { lineWidth: 0 }).trimEnd()).join('\n---\n'));
}

/** What a dry run of `ctl model add` says without -o: checked, nothing stored, what it would write. */
export function dryRunText(m: ModelManifests): string {
  const { model } = m;
  const lines = [
    `model "${model.name}" checked: it would be added (${model.replicas} replica${model.replicas === 1 ? '' : 's'}); nothing stored`,
  ];
  if (m.objects === null) lines.push(m.note ?? '');
  else
    for (const x of m.objects) {
      const meta = x['metadata'] as { name?: string; namespace?: string } | undefined;
      lines.push(
        `would write ${String(x['kind'])}/${meta?.name ?? '?'}${meta?.namespace === undefined ? '' : ` in namespace ${meta.namespace}`} (-o yaml prints it)`,
      );
    }
  return lines.join('\n');
}
