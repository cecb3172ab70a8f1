/**
 * The catalog as a key that is not admin reads it (ModelUseView): each model's state, ready
 * replicas, context and adapters; the API shows such a key no source, files or profiles.
 */
import { Link } from 'wouter';

import type { ModelUseView } from '../api.js';

const contextText = (m: ModelUseView) =>
  `${m.context_length === undefined ? "the model's own" : `${m.context_length} tokens`}${m.max_output === undefined ? '' : `, at most ${m.max_output} out`}`;

export function UseCatalog({ models }: { models: ModelUseView[] }) {
  return (
    <div className="table-scroll">
      <table aria-label="The catalog">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">State</th>
            <th scope="col">Ready</th>
            <th scope="col">Context</th>
            <th scope="col">Adapters</th>
          </tr>
        </thead>
        <tbody>
          {models.map((m) => (
            <tr key={m.name}>
              <th scope="row">
                <Link href={`/${encodeURIComponent(m.name)}`}>{m.name}</Link>
              </th>
              <td>{m.state.replace(/_/g, ' ')}</td>
              <td>{m.ready_replicas}</td>
              <td>{contextText(m)}</td>
              <td>{m.adapters.map((a) => `${m.name}:${a}`).join(', ')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function UseFacts({ model: m }: { model: ModelUseView }) {
  return (
    <dl className="facts" aria-label="The model">
      <dt>State</dt>
      <dd>{m.state.replace(/_/g, ' ')}</dd>
      <dt>Ready replicas</dt>
      <dd>{m.ready_replicas}</dd>
      <dt>Context</dt>
      <dd>{contextText(m)}</dd>
      <dt>Adapters</dt>
      <dd>{m.adapters.length === 0 ? 'none' : m.adapters.map((a) => `${m.name}:${a}`).join(', ')}</dd>
    </dl>
  );
}
