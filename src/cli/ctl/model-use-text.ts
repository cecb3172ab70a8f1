/**
 * `ctl models` and `ctl model show` for a key that is not admin, which GET /models answers with
 * what a client of each model needs (ModelUseView): its state, ready replicas, context and
 * adapters; never its source, files or profiles.
 */
import type { ModelUseView } from '../../protocol/model-views.js';
import { table } from '../output.js';

import { liveSections, type ModelLive } from './model-detail.js';

const label = (name: string) => `${name}:`.padEnd(20);

const contextText = (m: ModelUseView) =>
  m.context_length === undefined ? "the engine's default" : `${m.context_length} tokens`;

/** `sql, chat` as a client asks for them: `MODEL:sql`. */
const adaptersText = (m: ModelUseView) =>
  m.adapters.length === 0 ? 'none' : m.adapters.map((a) => `${m.name}:${a}`).join(', ');

export function useTable(items: readonly ModelUseView[]): string {
  return table(
    ['NAME', 'STATE', 'READY', 'CONTEXT', 'ADAPTERS'],
    items.map((m) => [
      m.name,
      m.state,
      String(m.ready_replicas),
      m.context_length === undefined ? '-' : String(m.context_length),
      m.adapters.length === 0 ? '-' : m.adapters.join(','),
    ]),
  );
}

export function useDetail(m: ModelUseView, live: ModelLive = {}): string {
  const head = [
    `${label('Name')}${m.name}`,
    `${label('State')}${m.state}`,
    `${label('Ready replicas')}${m.ready_replicas}`,
    `${label('Context')}${contextText(m)}`,
    ...(m.max_output === undefined ? [] : [`${label('Max output')}${m.max_output} tokens`]),
    `${label('Adapters')}${adaptersText(m)}`,
  ];
  return [head, ...liveSections(live)].map((s) => s.join('\n')).join('\n\n');
}
