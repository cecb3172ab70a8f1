import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Fragment, useId, useState } from 'react';
import { Link, useLocation } from 'wouter';

import { queryKeys, type ModelView, type ReplicaView } from '../api.js';
import { QueryError } from '../query-error.js';
import { AdminOnly, useSession } from '../session.js';
import { ContextDialog, GpusDialog } from './models-dialogs.js';
import { UseFacts } from './models-use.js';
import { isModelView } from '../../../src/protocol/model-views.js';
import {
  isDeclared,
  originText,
  profileText,
  rolloutText,
  scaleRows,
  shapeText,
  sizeText,
} from './models-rows.js';

/** One model: its origin and files, shape, profiles, replicas and rolling change; an admin's actions on it. */
export function ModelDetail({ name }: { name: string }) {
  const { api } = useSession();
  const model = useQuery({ queryKey: queryKeys.model(name), queryFn: () => api.model(name) });
  const replicas = useQuery({ queryKey: queryKeys.replicas, queryFn: () => api.replicas() });
  const m = model.data;
  return (
    <section aria-labelledby="view-title" className="model-detail">
      <p>
        <Link href="~/models">← Models</Link>
      </p>
      <h1 id="view-title">{name}</h1>
      <QueryError query={model} what={`model "${name}"`} />
      {m !== undefined && !isModelView(m) && (
        <>
          <UseFacts model={m} />
          <h2>Replicas</h2>
          <QueryError query={replicas} what="the replicas" />
          {replicas.data !== undefined && (
            <Replicas name={name} wanted={undefined} list={replicas.data.filter((r) => r.model === name)} />
          )}
        </>
      )}
      {m !== undefined && isModelView(m) && (
        <>
          {isDeclared(m) && (
            <p className="hint declared">
              Declared in the settings file: read-only here. Change it there, with{' '}
              <code>llmgw ctl config edit</code> or in the <Link href="~/settings">Settings</Link> view.
            </p>
          )}
          <Rollout model={m} />
          <AdminOnly>{!isDeclared(m) && <Actions model={m} />}</AdminOnly>
          <p>
            <Link href={`~/plan?model=${encodeURIComponent(m.name)}`}>Plan {m.name}</Link>: which classes and
            engines fit, at which context.
          </p>
          <Facts model={m} />
          <Scale model={m} />
          <h2>Replicas</h2>
          <QueryError query={replicas} what="the replicas" />
          {replicas.data !== undefined && (
            <Replicas name={name} wanted={m.replicas} list={replicas.data.filter((r) => r.model === name)} />
          )}
        </>
      )}
    </section>
  );
}

function Rollout({ model }: { model: ModelView }) {
  const r = model.status.rollout;
  const text = rolloutText(r);
  if (text === undefined || r === undefined) return null;
  const failed = r.state === 'failed';
  return (
    <div role={failed ? 'alert' : 'status'} className={failed ? 'error rollout' : 'rollout'}>
      {failed ? 'Change ' : 'Rolling: '}
      {text}
      {!failed && (
        <progress max={Math.max(r.total, 1)} value={r.replaced} aria-label="Replicas running the change" />
      )}
    </div>
  );
}

/** An autoscaled model's bounds, count and last decision. */
function Scale({ model }: { model: ModelView }) {
  const rows = scaleRows(model);
  if (rows === undefined) return null;
  return (
    <>
      <h2>Scale</h2>
      <dl className="facts" aria-label="Scale">
        {rows.map(([k, v]) => (
          <Fragment key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </Fragment>
        ))}
      </dl>
    </>
  );
}

function Facts({ model: m }: { model: ModelView }) {
  const o = m.status.origin;
  return (
    <>
      <h2>Origin</h2>
      <dl className="facts">
        <dt>Source</dt>
        <dd>
          <code>{m.source}</code>
        </dd>
        <dt>Pinned</dt>
        <dd>{originText(m)}</dd>
        {o?.commit !== undefined && (
          <>
            <dt>Commit</dt>
            <dd>
              <code>{o.commit}</code>
            </dd>
          </>
        )}
        <dt>Shape</dt>
        <dd>{shapeText(m)}</dd>
        <dt>Context</dt>
        <dd>
          {m.context_length === undefined ? "the model's own" : `${m.context_length} tokens`}
          {m.max_output === undefined ? '' : `, at most ${m.max_output} out`}
        </dd>
      </dl>
      {o !== undefined && (
        <details>
          <summary>Files ({o.files.length})</summary>
          <div className="table-scroll">
            <table aria-label="Files">
              <thead>
                <tr>
                  <th scope="col">Path</th>
                  <th scope="col">Size</th>
                </tr>
              </thead>
              <tbody>
                {o.files.map((f) => (
                  <tr key={f.path}>
                    <td>
                      <code>{f.path}</code>
                    </td>
                    <td>{sizeText(f.size)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      )}
      <h2>Profiles</h2>
      <ul>
        {m.profiles.map((p) => (
          <li key={p.name}>
            {profileText(p)}
            {p.args.length > 0 && (
              <>
                {' '}
                <code>{p.args.join(' ')}</code>
              </>
            )}
          </li>
        ))}
      </ul>
    </>
  );
}

function Replicas({ name, wanted, list }: { name: string; wanted: number | undefined; list: ReplicaView[] }) {
  if (list.length === 0)
    return <p className="hint">No replica{wanted === undefined ? '' : ` (${wanted} wanted)`}.</p>;
  return (
    <div className="table-scroll">
      <table aria-label={`Replicas of ${name}`}>
        <thead>
          <tr>
            <th scope="col">Replica</th>
            <th scope="col">State</th>
            <th scope="col">Node</th>
            <th scope="col">Restarts</th>
          </tr>
        </thead>
        <tbody>
          {list.map((r, i) => (
            <tr key={r.id ?? `pending-${i}`}>
              <td>{r.id ?? '(waiting for room)'}</td>
              <td>
                {r.state}
                {r.retiring === true ? ' (retiring)' : ''}
                {r.reason === undefined ? '' : `: ${r.reason}`}
              </td>
              <td>{r.node ?? '-'}</td>
              <td>{r.restarts}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Scale, GPUs…, Context… and remove: an admin's, on a model added through the API. */
function Actions({ model }: { model: ModelView }) {
  const { api } = useSession();
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const id = useId();
  const [replicas, setReplicas] = useState(String(model.replicas));
  const [dialog, setDialog] = useState<'gpus' | 'context' | undefined>();
  const [confirming, setConfirming] = useState(false);
  const changed = () => client.invalidateQueries({ queryKey: queryKeys.models });
  const scale = useMutation({
    mutationFn: (n: number) => api.scaleModel(model.name, n),
    onSuccess: () => void changed(),
  });
  const remove = useMutation({
    mutationFn: () => api.removeModel(model.name),
    onSuccess: () => {
      void changed();
      navigate('~/models');
    },
  });
  return (
    <div className="actions">
      <form
        className="inline"
        onSubmit={(e) => {
          e.preventDefault();
          scale.mutate(Number(replicas));
        }}
      >
        <label htmlFor={`${id}-replicas`}>Replicas</label>
        <input
          id={`${id}-replicas`}
          type="number"
          min={0}
          step={1}
          value={replicas}
          onChange={(e) => {
            setReplicas(e.target.value);
          }}
        />
        <button type="submit" disabled={scale.isPending}>
          Scale
        </button>
        {scale.error !== null && (
          <p role="alert" className="error">
            {scale.error.message}
          </p>
        )}
      </form>
      <button type="button" onClick={() => setDialog('gpus')}>
        GPUs…
      </button>
      <button type="button" onClick={() => setDialog('context')}>
        Context…
      </button>
      {confirming ? (
        <span className="confirm" role="group" aria-label={`Remove ${model.name}?`}>
          Remove {model.name}? Its replicas stop.{' '}
          <button
            type="button"
            className="danger"
            onClick={() => remove.mutate()}
            disabled={remove.isPending}
          >
            Remove
          </button>{' '}
          <button type="button" onClick={() => setConfirming(false)}>
            Keep
          </button>
        </span>
      ) : (
        <button type="button" onClick={() => setConfirming(true)}>
          Remove…
        </button>
      )}
      {remove.error !== null && (
        <p role="alert" className="error">
          {remove.error.message}
        </p>
      )}
      {dialog === 'gpus' && <GpusDialog model={model} onClose={() => setDialog(undefined)} />}
      {dialog === 'context' && <ContextDialog model={model} onClose={() => setDialog(undefined)} />}
    </div>
  );
}
