import { useQuery } from '@tanstack/react-query';

import { queryKeys } from '../api.js';
import { useSession } from '../session.js';
import { QueryError } from '../query-error.js';
import { deviceGroups, nodeCounts, replicaCounts } from './overview-counts.js';
import { TrafficPanel } from './overview-traffic-panel.js';

/** The cluster at a glance: nodes by state, devices by class used and free, replicas by state. */
export function Overview() {
  const { api } = useSession();
  const nodes = useQuery({ queryKey: queryKeys.nodes, queryFn: () => api.nodes() });
  const status = useQuery({ queryKey: queryKeys.status, queryFn: () => api.status() });
  const replicas = useQuery({ queryKey: queryKeys.replicas, queryFn: () => api.replicas() });
  const traffic = useQuery({ queryKey: queryKeys.traffic, queryFn: () => api.traffic() });

  return (
    <section aria-labelledby="view-title" className="overview">
      <h1 id="view-title">Overview</h1>
      <div className="cards">
        <article aria-labelledby="nodes-title" className="card">
          <h2 id="nodes-title">Nodes</h2>
          <QueryError query={nodes} what="the nodes" />
          {nodes.data && <NodesPanel counts={nodeCounts(nodes.data)} />}
        </article>
        <article aria-labelledby="replicas-title" className="card">
          <h2 id="replicas-title">Replicas</h2>
          <QueryError query={replicas} what="the replicas" />
          {replicas.data && <ReplicasPanel counts={replicaCounts(replicas.data)} />}
        </article>
      </div>
      <article aria-labelledby="traffic-title" className="card">
        <h2 id="traffic-title">Traffic</h2>
        <QueryError query={traffic} what="the gateway's traffic" />
        {traffic.data && <TrafficPanel traffic={traffic.data} />}
      </article>
      <article aria-labelledby="devices-title" className="card">
        <h2 id="devices-title">Devices by class</h2>
        <QueryError query={status} what="the cluster's status" />
        {status.data && <DevicesPanel devices={status.data.devices} excluded={status.data.excluded} />}
      </article>
    </section>
  );
}

function NodesPanel({ counts }: { counts: ReturnType<typeof nodeCounts> }) {
  return (
    <>
      <dl className="counts">
        <div>
          <dt>Ready</dt>
          <dd>{counts.ready}</dd>
        </div>
        <div>
          <dt>Not ready</dt>
          <dd>{counts.notReady.length}</dd>
        </div>
      </dl>
      {counts.notReady.length > 0 && (
        <ul className="reasons">
          {counts.notReady.map((n) => (
            <li key={n.name}>
              <strong>{n.name}</strong>: {n.reason ?? 'not ready'} (last seen{' '}
              <time dateTime={n.lastSeen}>{new Date(n.lastSeen).toLocaleString()}</time>)
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

function ReplicasPanel({ counts }: { counts: ReturnType<typeof replicaCounts> }) {
  if (counts.byState.length === 0) return <p className="hint">No replicas: add a model to serve one.</p>;
  return (
    <>
      <dl className="counts">
        {counts.byState.map((s) => (
          <div key={s.state} className={`state-${s.state}`}>
            <dt>{s.state}</dt>
            <dd>{s.count}</dd>
          </div>
        ))}
      </dl>
      {counts.notReady.length > 0 && (
        <ul className="reasons">
          {counts.notReady.map((r, i) => (
            <li key={r.id ?? `${r.model}-${i}`}>
              <strong>{r.model}</strong> {r.state}
              {r.progress !== undefined && (
                <>
                  {' '}
                  <progress value={r.progress} max={1} aria-label={`${r.model} download`} />{' '}
                  {Math.round(r.progress * 100)}%
                </>
              )}
              {r.reason !== undefined && <>: {r.reason}</>}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

function DevicesPanel({
  devices,
  excluded,
}: {
  devices: Parameters<typeof deviceGroups>[0];
  excluded: { node: string; card: number; reason: string }[];
}) {
  const groups = deviceGroups(devices);
  return (
    <>
      {groups.length === 0 ? (
        <p className="hint">
          No GPUs: no node has joined with one (llmgw ctl node token makes a join token).
        </p>
      ) : (
        <div className="table-scroll">
          <table>
            <caption className="visually-hidden">Devices by class, used and free</caption>
            <thead>
              <tr>
                <th scope="col">Class</th>
                <th scope="col">Kind</th>
                <th scope="col">Total</th>
                <th scope="col">Used</th>
                <th scope="col">Free</th>
              </tr>
            </thead>
            <tbody>
              {groups.flatMap((g) =>
                g.rows.map((r) => (
                  <tr key={r.class}>
                    <th scope="row">{r.class}</th>
                    <td>{r.mig === undefined ? 'card' : `MIG ${r.mig}`}</td>
                    <td>{r.total}</td>
                    <td>{r.used}</td>
                    <td>
                      {r.free}
                      {r.otherProcesses > 0 && (
                        <span className="hint"> ({r.otherProcesses} held by other processes)</span>
                      )}
                    </td>
                  </tr>
                )),
              )}
            </tbody>
          </table>
        </div>
      )}
      {excluded.length > 0 && (
        <>
          <h3>Cards left out</h3>
          <ul className="reasons">
            {excluded.map((x) => (
              <li key={`${x.node}/${x.card}`}>
                <strong>
                  {x.node} card {x.card}
                </strong>
                : {x.reason}
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}
