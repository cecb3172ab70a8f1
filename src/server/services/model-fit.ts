import { engines } from '../../engines/registry.js';
import { cpuClass } from '../../gpu/classes.js';
import {
  type ClassMemory,
  MIB,
  type PlanDevice,
  planProfile,
  withClassesThatFit,
} from '../../planner/index.js';
import type { ModelView } from '../../protocol/model-views.js';
import type { NodeView } from '../../protocol/node-views.js';

/**
 * Whether a model fits the cluster, as the catalog tells it when a model is added or changed:
 * the planner on the classes the nodes report, the same answer placement gives later.
 */

/**
 * The device classes of the nodes, each with the largest memory a node reported for it (a
 * replica goes where it fits), and `cpu` with the largest node's RAM.
 */
export function clusterClasses(nodes: readonly NodeView[]): ClassMemory[] {
  const memory = new Map<string, number>();
  for (const n of nodes) {
    for (const d of n.devices) {
      const bytes = d.memory_total_mib * MIB;
      memory.set(d.class, Math.max(memory.get(d.class) ?? 0, bytes));
    }
  }
  const gpus = [...memory.keys()].sort().map((c) => ({ class: c, memoryBytes: memory.get(c) }));
  if (nodes.length === 0) return gpus;
  const ram = Math.max(...nodes.map((n) => n.host.memory.total_mib)) * MIB;
  return [...gpus, { class: cpuClass, memoryBytes: ram > 0 ? ram : undefined }];
}

/**
 * Why none of a model's profiles fits any class of the cluster, one line per profile, in the
 * planner's words with the classes of the cluster where it would fit; empty when one profile
 * fits, when the model's shape is not known, or when no node has joined (nothing to judge).
 * What the planner could not check counts as fitting: a warning is only said when sure.
 */
export function fitWarnings(model: ModelView, nodes: readonly NodeView[]): string[] {
  const shape = model.status.shape;
  if (shape === undefined || nodes.length === 0) return [];
  const classes = clusterClasses(nodes);
  const memory = new Map(classes.map((c) => [c.class, c.memoryBytes]));
  const device = (cls: string, bytes: number | undefined): PlanDevice =>
    cls === cpuClass ? { cpu: true, ramBytes: bytes ?? NaN } : { class: cls, memoryBytes: bytes ?? NaN };
  const base = { engines, shape, files: model.status.origin?.files, context: model.context_length };

  const lines: string[] = [];
  for (const p of model.profiles) {
    const cls = p.cpu === true ? cpuClass : (p.gpu_class ?? '');
    if (!memory.has(cls)) {
      const here = classes.map((c) => c.class).join(', ');
      lines.push(`profile "${p.name}": no node has ${cls} cards (classes here: ${here})`);
      continue;
    }
    const plan = planProfile({ ...base, profile: p, device: device(cls, memory.get(cls)) });
    if (plan.fits) return [];
    const elsewhere = classes
      .filter((c) => c.class !== cls && c.class !== cpuClass)
      .filter((c) => {
        const there = planProfile({
          ...base,
          profile: p,
          device: device(c.class, c.memoryBytes),
          maxCards: 0,
        });
        return there.fits && there.checked;
      })
      .map((c) => c.class);
    const reason = plan.reason ?? `a replica does not fit ${cls}`;
    lines.push(`profile "${p.name}": ${withClassesThatFit(reason, elsewhere)}`);
  }
  return lines;
}
