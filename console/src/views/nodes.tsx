import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState, type SyntheticEvent } from 'react';

import { queryKeys, type CreatedJoinToken, type NodeView } from '../api.js';
import { QueryError } from '../query-error.js';
import { AdminOnly, useSession } from '../session.js';
import { useNow } from './use-now.js';
import { CopyButton } from './copy-button.js';
import { age, deviceRow, expiryChoices, joinCommand, memoryBar, nodeWarnings } from './nodes-rows.js';

const mib = new Intl.NumberFormat('en-US');

/** Each node: its devices, the cards it leaves out, its warnings; admins make join tokens and remove nodes. */
export function Nodes() {
  const { api } = useSession();
  const nodes = useQuery({ queryKey: queryKeys.nodes, queryFn: () => api.nodes() });
  const now = useNow();

  return (
    <section aria-labelledby="view-title" className="nodes">
      <div className="view-head">
        <h1 id="view-title">Nodes</h1>
        <AdminOnly>
          <JoinToken />
        </AdminOnly>
      </div>
      <QueryError query={nodes} what="the nodes" />
      {nodes.data?.length === 0 && (
        <p className="hint">
          No nodes yet: make a join token, then run <code>llmgw agent --server URL --token TOKEN</code> on
          each machine.
        </p>
      )}
      {nodes.data?.map((n) => (
        <NodeCard key={n.id} node={n} now={now} />
      ))}
    </section>
  );
}

function NodeCard({ node: n, now }: { node: NodeView; now: number }) {
  const titleId = useId();
  const warnings = nodeWarnings(n);
  const host = n.host;
  const ram = memoryBar(host.memory.total_mib - host.memory.free_mib, host.memory.total_mib);
  return (
    <article aria-labelledby={titleId} className="card node">
      <header className="node-head">
        <h2 id={titleId}>{n.name}</h2>
        <span className={`badge state-${n.state}`}>{n.state === 'ready' ? 'Ready' : 'Not ready'}</span>
        <span className="hint">
          last seen{' '}
          <time dateTime={n.last_seen} title={new Date(n.last_seen).toLocaleString()}>
            {age(n.last_seen, now)}
          </time>{' '}
          ago
        </span>
        <AdminOnly>
          <RemoveNode name={n.name} />
        </AdminOnly>
      </header>
      {n.reason !== undefined && <p className="error">{n.reason}</p>}
      <dl className="facts">
        <div>
          <dt>Address</dt>
          <dd>{n.address}</dd>
        </div>
        <div>
          <dt>Host</dt>
          <dd>
            {host.hostname}, {host.os} {host.arch}
          </dd>
        </div>
        <div>
          <dt>CPUs</dt>
          <dd>
            {host.cpus.count} × {host.cpus.model}
          </dd>
        </div>
        <div>
          <dt>Memory</dt>
          <dd>{ram.text} used</dd>
        </div>
        <div>
          <dt>Disk</dt>
          <dd>
            {mib.format(host.disk.free_mib)} MiB free of {mib.format(host.disk.total_mib)} under{' '}
            {host.disk.path}
          </dd>
        </div>
        <div>
          <dt>Agent</dt>
          <dd>{n.agent_version}</dd>
        </div>
        <div>
          <dt>Discovery</dt>
          <dd>
            {n.discovery.method}
            {n.driver_version === undefined ? '' : `, driver ${n.driver_version}`}
            {n.cuda_version === undefined ? '' : `, CUDA ${n.cuda_version}`}
          </dd>
        </div>
      </dl>
      {warnings.length > 0 && (
        <>
          <h3>Warnings</h3>
          <ul className="reasons warnings">
            {warnings.map((w) => (
              <li key={w.message} className={w.blocking ? 'error' : 'warn'}>
                {w.message}
              </li>
            ))}
          </ul>
        </>
      )}
      {n.devices.length === 0 ? (
        <p className="hint">No GPU devices: this node serves on its CPUs.</p>
      ) : (
        <DevicesTable node={n} />
      )}
      {n.excluded.length > 0 && (
        <>
          <h3>Cards left out</h3>
          <ul className="reasons">
            {n.excluded.map((x) => (
              <li key={x.uuid}>
                <strong>
                  card {x.card} ({x.class})
                </strong>
                : {x.reason}
              </li>
            ))}
          </ul>
        </>
      )}
    </article>
  );
}

function DevicesTable({ node: n }: { node: NodeView }) {
  return (
    <div className="table-scroll">
      <table>
        <caption className="visually-hidden">Devices of {n.name}</caption>
        <thead>
          <tr>
            <th scope="col">Device</th>
            <th scope="col">Class</th>
            <th scope="col">Memory</th>
            <th scope="col">Temp.</th>
            <th scope="col">Power</th>
            <th scope="col">Util.</th>
            <th scope="col">Processes</th>
          </tr>
        </thead>
        <tbody>
          {n.devices.map((d) => {
            const r = deviceRow(d);
            return (
              <tr key={d.uuid}>
                <th scope="row">{r.id}</th>
                <td>
                  {r.class}
                  <span className="hint"> ({r.kind})</span>
                </td>
                <td className="memory">
                  <meter
                    min={0}
                    max={Math.max(1, r.memory.total)}
                    value={r.memory.used}
                    high={r.memory.total * 0.9}
                    aria-label={`memory of ${n.name} ${r.id}`}
                  />{' '}
                  <span>{r.memory.text}</span>
                </td>
                <td>{r.temperature}</td>
                <td>{r.power}</td>
                <td>{r.utilisation}</td>
                <td>
                  {r.processes.length === 0 ? (
                    '—'
                  ) : (
                    <ul className="plain">
                      {r.processes.map((p) => (
                        <li key={p}>{p}</li>
                      ))}
                    </ul>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/** Remove, asked twice: the agent is disconnected and must join again. */
function RemoveNode({ name }: { name: string }) {
  const { api } = useSession();
  const client = useQueryClient();
  const [asking, setAsking] = useState(false);
  const errorId = useId();
  const remove = useMutation({
    mutationFn: () => api.removeNode(name),
    onSuccess: () => {
      setAsking(false);
      void client.invalidateQueries({ queryKey: queryKeys.nodes });
      void client.invalidateQueries({ queryKey: queryKeys.status });
    },
  });
  return (
    <span className="node-actions">
      {asking ? (
        <>
          <span>Its agent is disconnected and must join again with a token.</span>
          <button
            type="button"
            className="danger"
            disabled={remove.isPending}
            aria-describedby={remove.error === null ? undefined : errorId}
            onClick={() => {
              remove.mutate();
            }}
          >
            Remove {name}
          </button>
          <button
            type="button"
            onClick={() => {
              setAsking(false);
              remove.reset();
            }}
          >
            Cancel
          </button>
        </>
      ) : (
        <button
          type="button"
          aria-label={`Remove node ${name}…`}
          onClick={() => {
            setAsking(true);
          }}
        >
          Remove…
        </button>
      )}
      {remove.error !== null && (
        <span id={errorId} role="alert" className="error">
          {remove.error.message}
        </span>
      )}
    </span>
  );
}

/**
 * The join-token dialog: a name and an expiry, then the token, shown this once (closing the
 * dialog forgets it), with the command to run on each machine.
 */
export function JoinToken() {
  const [open, setOpen] = useState(false);
  const opener = useRef<HTMLButtonElement>(null);
  return (
    <>
      <button
        ref={opener}
        type="button"
        aria-haspopup="dialog"
        aria-expanded={open}
        onClick={() => {
          setOpen(true);
        }}
      >
        Join token…
      </button>
      {open && (
        <JoinTokenDialog
          onClose={() => {
            setOpen(false);
            opener.current?.focus();
          }}
        />
      )}
    </>
  );
}

function JoinTokenDialog({ onClose }: { onClose: () => void }) {
  const { api } = useSession();
  const ids = useId();
  const first = useRef<HTMLInputElement>(null);
  const [name, setName] = useState('');
  const [expiry, setExpiry] = useState('0');
  // Held here only: closing the dialog drops it, so the secret is shown once.
  const [created, setCreated] = useState<CreatedJoinToken | undefined>();
  const create = useMutation({
    mutationFn: () => {
      const seconds = expiryChoices[Number(expiry)]?.seconds;
      return api.createJoinToken({
        ...(name === '' ? {} : { name }),
        ...(seconds === undefined ? {} : { expires_in: seconds }),
      });
    },
    onSuccess: (c) => {
      setCreated(c);
    },
  });
  useEffect(() => {
    first.current?.focus();
  }, []);
  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    create.mutate();
  };
  const server = window.location.origin;

  return (
    <div
      role="dialog"
      aria-labelledby={`${ids}-title`}
      className="dialog card"
      onKeyDown={(e) => {
        if (e.key === 'Escape') onClose();
      }}
    >
      <h2 id={`${ids}-title`}>Join token</h2>
      {created === undefined ? (
        <form onSubmit={submit}>
          <label htmlFor={`${ids}-name`}>Name (optional)</label>
          <input
            ref={first}
            id={`${ids}-name`}
            value={name}
            placeholder="rack-3"
            aria-describedby={create.error === null ? undefined : `${ids}-error`}
            onChange={(e) => {
              setName(e.target.value);
            }}
          />
          <label htmlFor={`${ids}-expiry`}>Valid for</label>
          <select
            id={`${ids}-expiry`}
            value={expiry}
            onChange={(e) => {
              setExpiry(e.target.value);
            }}
          >
            {expiryChoices.map((c, i) => (
              <option key={c.label} value={String(i)}>
                {c.label}
              </option>
            ))}
          </select>
          {create.error !== null && (
            <p id={`${ids}-error`} role="alert" className="error">
              {create.error.message}
            </p>
          )}
          <div className="buttons">
            <button type="submit" disabled={create.isPending}>
              Create token
            </button>
            <button type="button" onClick={onClose}>
              Cancel
            </button>
          </div>
        </form>
      ) : (
        <div className="created">
          <p>
            Join token &quot;{created.token.name}&quot; created
            {created.token.expires_at === null ? '' : `, valid until ${created.token.expires_at}`}.{' '}
            <strong>It is shown only this once.</strong>
          </p>
          <label htmlFor={`${ids}-secret`}>Token</label>
          <div className="copy-row">
            <input id={`${ids}-secret`} readOnly value={created.secret} className="mono" />
            <CopyButton text={created.secret} label="Copy the token" field={`${ids}-secret`} />
          </div>
          <label htmlFor={`${ids}-command`}>On each machine to join, run</label>
          <div className="copy-row">
            <input
              id={`${ids}-command`}
              readOnly
              value={joinCommand(server, created.secret)}
              className="mono"
            />
            <CopyButton
              text={joinCommand(server, created.secret)}
              label="Copy the command"
              field={`${ids}-command`}
            />
          </div>
          <div className="buttons">
            <button type="button" onClick={onClose}>
              Done
            </button>
          </div>
        </div>
      )}
    </div>
  );
}
