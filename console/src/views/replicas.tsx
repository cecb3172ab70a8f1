import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState } from 'react';

import { ApiError, queryKeys, type ReplicaView } from '../api.js';
import { QueryError } from '../query-error.js';
import { AdminOnly, useSession } from '../session.js';
import { useNow } from './use-now.js';
import { age, unknown } from './nodes-rows.js';
import { LogLines, percentDone, progressText, replicaRow, shardDevices } from './replicas-rows.js';

/** Every replica with its state and why; one's shards, its live log, and restarts (admins). */
export function Replicas() {
  const { api } = useSession();
  const replicas = useQuery({ queryKey: queryKeys.replicas, queryFn: () => api.replicas() });
  const [selected, setSelected] = useState<string | undefined>();
  const now = useNow();
  const rows = (replicas.data ?? []).map((r, i) => replicaRow(r, i, now));

  return (
    <section aria-labelledby="view-title" className="replicas">
      <h1 id="view-title">Replicas</h1>
      <QueryError query={replicas} what="the replicas" />
      {replicas.data?.length === 0 && <p className="hint">No replicas: add a model to serve one.</p>}
      {rows.length > 0 && (
        <div className="table-scroll">
          <table>
            <caption className="visually-hidden">Replicas</caption>
            <thead>
              <tr>
                <th scope="col">Replica</th>
                <th scope="col">Model</th>
                <th scope="col">State</th>
                <th scope="col">Node</th>
                <th scope="col">Devices</th>
                <th scope="col">Restarts</th>
                <th scope="col">Ready since</th>
                <th scope="col">Endpoint</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.key} aria-selected={r.id !== null && r.id === selected}>
                  <th scope="row">
                    {r.id === null ? (
                      <span className="hint">waiting</span>
                    ) : (
                      <button
                        type="button"
                        className="link"
                        aria-pressed={r.id === selected}
                        aria-label={`Show replica ${r.id}`}
                        onClick={() => {
                          setSelected(r.id === selected || r.id === null ? undefined : r.id);
                        }}
                      >
                        {r.id}
                      </button>
                    )}
                  </th>
                  <td>
                    {r.model}
                    <span className="hint"> ({r.profile})</span>
                  </td>
                  <td className={`state-${r.state}`}>
                    <span className="badge">{r.stateText}</span>
                    {r.progress !== undefined && (
                      <>
                        {' '}
                        <progress value={r.progress} max={1} aria-label={`download of ${r.id ?? r.model}`} />
                        <span className="hint"> {r.progressText}</span>
                      </>
                    )}
                    {r.reason !== undefined && <div className="reason">{r.reason}</div>}
                  </td>
                  <td>{r.node}</td>
                  <td>{r.devices}</td>
                  <td>{r.restarts}</td>
                  <td>{r.readySince}</td>
                  <td className="mono">{r.endpoint}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {selected !== undefined && (
        <ReplicaDetail
          key={selected}
          id={selected}
          onClose={() => {
            setSelected(undefined);
          }}
        />
      )}
    </section>
  );
}

function ReplicaDetail({ id, onClose }: { id: string; onClose: () => void }) {
  const { api } = useSession();
  const replica = useQuery({ queryKey: queryKeys.replica(id), queryFn: () => api.replica(id) });
  const titleId = useId();
  const r = replica.data;
  const now = useNow();
  return (
    <article aria-labelledby={titleId} className="card detail">
      <header className="node-head">
        <h2 id={titleId}>Replica {id}</h2>
        {r !== undefined && (
          <span className="hint">
            {r.model}, {r.profile ?? unknown}, {r.engine ?? unknown}
            {r.retiring === true ? ' — being replaced: it stops once its successor is ready' : ''}
          </span>
        )}
        <button type="button" onClick={onClose}>
          Close
        </button>
      </header>
      <QueryError query={replica} what={`replica ${id}`} />
      {r !== undefined && (
        <>
          <AdminOnly>
            <Restart replica={r} />
          </AdminOnly>
          <h3>Shards</h3>
          <div className="table-scroll">
            <table>
              <caption className="visually-hidden">Shards of replica {id}</caption>
              <thead>
                <tr>
                  <th scope="col">Rank</th>
                  <th scope="col">Node</th>
                  <th scope="col">Devices</th>
                  <th scope="col">Port</th>
                  <th scope="col">State</th>
                  <th scope="col">PID</th>
                  <th scope="col">Restarts</th>
                  <th scope="col">Ready since</th>
                </tr>
              </thead>
              <tbody>
                {r.shards.map((s) => (
                  <tr key={s.rank}>
                    <th scope="row">{s.rank}</th>
                    <td>{s.node}</td>
                    <td>{shardDevices(s)}</td>
                    <td>{s.port}</td>
                    <td className={`state-${s.state}`}>
                      {s.state}
                      {s.download !== undefined && (
                        <div className="hint">
                          {percentDone(s.download)}% — {progressText(s.download)}
                        </div>
                      )}
                      {s.reason !== undefined && <div className="reason">{s.reason}</div>}
                      {s.last_exit !== undefined && (
                        <details>
                          <summary>
                            last exit{' '}
                            {s.last_exit.code === null
                              ? `by ${s.last_exit.signal ?? '?'}`
                              : `code ${s.last_exit.code}`}{' '}
                            {age(s.last_exit.at, now)} ago
                          </summary>
                          <pre className="log">{s.last_exit.log_tail.join('\n')}</pre>
                        </details>
                      )}
                    </td>
                    <td>{s.pid ?? unknown}</td>
                    <td>{s.restarts}</td>
                    <td>{s.ready_since === undefined ? unknown : `${age(s.ready_since, now)} ago`}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <AdminOnly>
            <Logs replica={r} />
          </AdminOnly>
        </>
      )}
    </article>
  );
}

/** Restart beside it (a new one first) or in place (stopped first); a refusal shows here. */
export function Restart({ replica }: { replica: ReplicaView }) {
  const { api } = useSession();
  const client = useQueryClient();
  const ids = useId();
  const id = replica.id ?? '';
  const restart = useMutation({
    mutationFn: (inPlace: boolean) => api.restartReplica(id, inPlace),
    onSettled: () => {
      void client.invalidateQueries({ queryKey: queryKeys.replicas });
      void client.invalidateQueries({ queryKey: queryKeys.rollouts });
    },
  });
  const failed = restart.error !== null;
  return (
    <div className="actions" role="group" aria-label={`Restart replica ${id}`}>
      <button
        type="button"
        disabled={restart.isPending}
        aria-describedby={failed ? `${ids}-said` : undefined}
        onClick={() => {
          restart.mutate(false);
        }}
      >
        Restart beside
      </button>
      <button
        type="button"
        disabled={restart.isPending}
        aria-describedby={failed ? `${ids}-said` : undefined}
        onClick={() => {
          restart.mutate(true);
        }}
      >
        Restart in place
      </button>
      {restart.error !== null && (
        <p id={`${ids}-said`} role="alert" className="error">
          {restart.error.message}
          {restart.error instanceof ApiError && restart.error.code === 'conflict' && !restart.variables
            ? ' (here: Restart in place)'
            : ''}
        </p>
      )}
      {restart.data !== undefined && (
        <p role="status" className="ok">
          {restart.data.message}
        </p>
      )}
    </div>
  );
}

/** A shard's engine log, followed like `ctl logs -f` until stopped or the view is left. */
export function Logs({ replica }: { replica: ReplicaView }) {
  const { api } = useSession();
  const ids = useId();
  const id = replica.id ?? '';
  const [rank, setRank] = useState(0);
  const [following, setFollowing] = useState(false);
  const [text, setText] = useState('');
  const [error, setError] = useState<string | undefined>();
  const [ended, setEnded] = useState(false);
  const pre = useRef<HTMLPreElement>(null);

  useEffect(() => {
    if (!following) return;
    const ac = new AbortController();
    const lines = new LogLines();
    void (async () => {
      try {
        const body = await api.logs(id, { rank, tail: 200, follow: true, signal: ac.signal });
        const reader = body.getReader();
        const decoder = new TextDecoder();
        ac.signal.addEventListener('abort', () => void reader.cancel().catch(() => undefined), {
          once: true,
        });
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          lines.push(decoder.decode(value, { stream: true }));
          setText(lines.text());
        }
        if (!ac.signal.aborted) {
          setEnded(true);
          setFollowing(false);
        }
      } catch (e) {
        if (ac.signal.aborted) return;
        setError(e instanceof Error ? e.message : String(e));
        setFollowing(false);
      }
    })();
    return () => {
      ac.abort();
    };
  }, [api, id, rank, following]);

  // Keeps the newest line in sight, unless the reader scrolled up to read.
  useEffect(() => {
    const el = pre.current;
    if (el !== null && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [text]);

  return (
    <section aria-labelledby={`${ids}-title`} className="logs">
      <h3 id={`${ids}-title`}>Log</h3>
      <div className="actions">
        {replica.shards.length > 1 && (
          <>
            <label htmlFor={`${ids}-rank`}>Shard</label>
            <select
              id={`${ids}-rank`}
              value={rank}
              onChange={(e) => {
                setText('');
                setRank(Number(e.target.value));
              }}
            >
              {replica.shards.map((s) => (
                <option key={s.rank} value={s.rank}>
                  {s.rank} on {s.node}
                </option>
              ))}
            </select>
          </>
        )}
        <button
          type="button"
          aria-pressed={following}
          onClick={() => {
            if (!following) {
              setText('');
              setError(undefined);
              setEnded(false);
            }
            setFollowing(!following);
          }}
        >
          {following ? 'Stop following' : 'Follow the log'}
        </button>
        {error !== undefined && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        {ended && (
          <span role="status" className="hint">
            The log ended: the shard stopped or has not started.
          </span>
        )}
      </div>
      <pre
        ref={pre}
        className="log"
        role="log"
        aria-label={`log of replica ${id} shard ${rank}`}
        tabIndex={0}
      >
        {text === '' ? (following ? 'Waiting for lines…' : '') : text}
      </pre>
    </section>
  );
}
