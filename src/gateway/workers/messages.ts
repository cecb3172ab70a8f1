import type { UsageRow } from '../usage-recorder.js';
import type { RouteTable } from '../../protocol/routes.js';
import type { GatewayCounts } from '../../protocol/traffic-views.js';
import type { GatewayLoadReport, WakeAnswer } from '../../protocol/load-report.js';
import type { ServingCertificate } from '../../http1/http-server.js';
import type { GatewayPrincipal } from '../keys.js';
import type { LimitRefusal } from '../rate-limits.js';
import type { BreakerEvidence, BreakerSnapshot } from '../router/breaker.js';

/**
 * What a gateway worker and its primary say over the worker's IPC channel (Node's, with
 * 'advanced' serialization, so Maps and Buffers cross as they are). Both ends are this
 * package's code of one version, started together: the messages are typed, not re-validated.
 */

/** What a worker needs to serve: sent with the listening socket. */
export interface WorkerInit {
  t: 'init';
  /** 0-based, stable across restarts of the same slot: names the worker in logs. */
  slot: number;
  gateway: {
    maxBodyBytes: number;
    retries: number;
    upstreamIdleMs: number;
    queue: { maxPerModel: number; timeoutMs: number };
  };
  maxConnectionsPerClient: number;
  /** The primary's unix socket for what a worker does not serve. */
  relayPath: string;
  tls: ServingCertificate | undefined;
  routes: RouteTable;
  /** How long a worker keeps a key's answer (the primary's store answers a revocation at once). */
  keyTtlMs: number;
  /** The replicas' breakers as the primary holds them (one per replica for every process). */
  breakers: Map<string, BreakerSnapshot>;
}

export type ToWorker =
  | WorkerInit
  | { t: 'routes'; routes: RouteTable }
  | { t: 'cert'; tls: ServingCertificate }
  | { t: 'peers'; counts: Map<string, number> }
  | { t: 'reply'; id: number; value?: unknown; error?: WireError }
  | { t: 'collect'; id: number }
  | { t: 'stop'; graceMs: number }
  /** Breakers the primary's board changed: each worker adopts them. */
  | { t: 'breakers'; states: Map<string, BreakerSnapshot> }
  /** Other workers' connections open per client address, where their sums changed (0: none). */
  | { t: 'peer-connections'; counts: Map<string, number> };

export type Call =
  | { method: 'key'; secret: string }
  | { method: 'admit'; key: string; rpm: number | null; tpm: number | null }
  | { method: 'metrics' }
  /** Answered once written: a worker keeps rows it could not write for its next try, as the primary's gateway does. */
  | { method: 'usage'; rows: UsageRow[] }
  /** A model at zero asked to start (the autoscaler's waiting room), answered by the primary's signals. */
  | { method: 'wake'; model: string };

export type CallResult = {
  key: GatewayPrincipal;
  admit: LimitRefusal | undefined;
  metrics: { contentType: string; text: string };
  usage: undefined;
  wake: WakeAnswer;
};

export type ToPrimary =
  | { t: 'listening' }
  /** It could not listen on the address (EADDRINUSE): the primary's start fails with this. */
  | { t: 'failed'; code: string | undefined; message: string }
  | { t: 'call'; id: number; call: Call }
  | { t: 'charge'; key: string; tokens: number; tpm: number | null }
  | { t: 'inflight'; counts: Map<string, number> }
  /** The worker's request counters, every second, for the control plane's traffic series. */
  | { t: 'counts'; counts: GatewayCounts }
  /** The worker's load report, for the autoscaler (ScaleSignals.report) through the primary. */
  | { t: 'report'; report: GatewayLoadReport }
  | { t: 'collected'; id: number; metrics: unknown[] }
  /** Evidence that changed the worker's breaker of a replica, for the primary's board. */
  | { t: 'breaker'; replica: string; evidence: BreakerEvidence }
  /** The worker's connections open per client address that changed (0: none), for max_connections_per_client. */
  | { t: 'connections'; counts: Map<string, number> };

/** An error crossing the channel: a GatewayError's code and words, rebuilt as one on the other side. */
export interface WireError {
  code: string;
  message: string;
  retryAfterS?: number | undefined;
}
