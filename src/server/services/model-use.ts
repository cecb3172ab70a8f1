/**
 * What a key that is not admin reads of the catalog: each model it may use, as a client needs
 * it (ModelUseView), from the same route table the gateway routes by. Pure.
 */
import type { ModelUseView, ModelView } from '../../protocol/model-views.js';
import type { RouteTable } from '../../protocol/routes.js';

/** Whether a key limited to `allowed` models (null: all) may read this one. */
export function mayRead(allowed: readonly string[] | null, model: string): boolean {
  return allowed === null || allowed.includes(model);
}

export function modelUseView(m: ModelView, table: RouteTable): ModelUseView {
  const ready = table.replicas.filter((r) => r.model === m.name).length;
  const entry = table.models.find((e) => e.name === m.name);
  const wanted = m.status.scale?.replicas ?? m.replicas;
  const state: ModelUseView['state'] =
    ready > 0
      ? 'ready'
      : wanted === 0
        ? m.autoscale?.min === 0
          ? 'scaled_to_zero'
          : 'stopped'
        : entry?.unavailable !== undefined
          ? 'unavailable'
          : 'starting';
  return {
    name: m.name,
    state,
    ready_replicas: ready,
    ...(m.context_length === undefined ? {} : { context_length: m.context_length }),
    ...(m.max_output === undefined ? {} : { max_output: m.max_output }),
    adapters: [...new Set(m.profiles.flatMap((p) => p.adapters.map((a) => a.name)))],
  };
}
