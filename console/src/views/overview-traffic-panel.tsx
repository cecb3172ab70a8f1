import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';

import type { TrafficView } from '../api.js';
import { chartRows, millis, rate, trafficSummary, type Figure } from './overview-traffic.js';

/**
 * The gateway's own figures: requests/s, tokens/s, time to first token and errors, now (the
 * last 10 s step) and over the hour the series holds; a chart of the rates over that hour.
 */
export function TrafficPanel({ traffic }: { traffic: TrafficView }) {
  if (!traffic.gateway)
    return (
      <p className="hint">
        The gateway runs apart (llmgw gateway): its traffic is on its own /metrics, for Prometheus.
      </p>
    );
  const s = trafficSummary(traffic);
  const rows: [string, Figure, (n: number | null) => string][] = [
    ['Requests/s', s.requestsPerS, rate],
    ['Tokens/s', s.tokensPerS, rate],
    ['Time to first token, p50', s.ttftP50Ms, millis],
    ['Time to first token, p95', s.ttftP95Ms, millis],
    ['Errors/s', s.errorsPerS, rate],
  ];
  return (
    <>
      <div className="table-scroll">
        <table>
          <caption className="visually-hidden">The gateway&apos;s traffic now and over the last hour</caption>
          <thead>
            <tr>
              <th scope="col">Figure</th>
              <th scope="col">Now</th>
              <th scope="col">Last {s.minutes > 0 ? `${s.minutes} min` : 'hour'}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map(([name, f, show]) => (
              <tr key={name}>
                <th scope="row">{name}</th>
                <td>{show(f.now)}</td>
                <td>{show(f.hour)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {traffic.points.length > 1 && (
        <figure className="chart" aria-label="Requests, tokens and errors per second over the last hour">
          <ResponsiveContainer width="100%" height={220}>
            <LineChart data={chartRows(traffic)} margin={{ top: 8, right: 16, bottom: 0, left: 0 }}>
              <CartesianGrid strokeDasharray="3 3" stroke="var(--border)" />
              <XAxis dataKey="time" minTickGap={40} stroke="var(--muted)" />
              <YAxis yAxisId="requests" stroke="var(--muted)" allowDecimals />
              <YAxis yAxisId="tokens" orientation="right" stroke="var(--muted)" />
              <Tooltip />
              <Legend />
              <Line
                yAxisId="requests"
                dataKey="requests"
                name="requests/s"
                dot={false}
                stroke="var(--accent)"
                isAnimationActive={false}
              />
              <Line
                yAxisId="requests"
                dataKey="errors"
                name="errors/s"
                dot={false}
                stroke="var(--error)"
                isAnimationActive={false}
              />
              <Line
                yAxisId="tokens"
                dataKey="tokens"
                name="tokens/s"
                dot={false}
                stroke="var(--ok)"
                isAnimationActive={false}
              />
            </LineChart>
          </ResponsiveContainer>
        </figure>
      )}
    </>
  );
}
