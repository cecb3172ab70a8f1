import type { Logger } from 'pino';

import type { ScaleSignals } from '../protocol/load-report.js';

import type { RouterOptions } from './router/index.js';
import type { GatewayKeys, KeyLimits, RouteSource, UsageSink } from './services.js';

/** What a gateway is given (./services.ts) and its bounds; the defaults serve. */
export interface GatewayOptions {
  /** Where keys are checked. */
  keys: GatewayKeys;
  /** The ready replicas and the catalog, asked again every `refreshMs`. */
  routes: RouteSource;
  /** Where counted usage is written. */
  usage: UsageSink;
  logger: Logger;
  maxBodyBytes?: number;
  queue?: { maxPerModel: number; timeoutMs: number };
  refreshMs?: number;
  scrapeMs?: number;
  /** Other replicas tried after one refused the connection or failed before the first byte (see forward). */
  retries?: number;
  /**
   * How long an engine may send nothing on a request (before its answer's head, or between
   * bytes of it) before the request is answered 504 and the replica leaves rotation (default 300 s).
   */
  upstreamIdleMs?: number;
  /**
   * Where the load report goes every `reportMs` and wake-ups of models scaled to zero are
   * asked for: the autoscaler in process, or the control plane's API (remoteSignals).
   */
  signals?: ScaleSignals | undefined;
  /** How often the load report is sent (default 1 s). */
  reportMs?: number;
  /** This gateway's name in its load reports (default host:pid:random). */
  gatewayId?: string;
  /**
   * Requests for a model scaled to zero (wakeable, no ready replica) wait while one starts:
   * at most `maxPerModel` per model (default 1000), each for `timeoutMs` (default 300 s).
   * Streamed ones get an SSE comment every `heartbeatMs` (default 5 s); the model is woken
   * again every `wakeEveryMs` (default 5 s) and the routes read every `refreshMs` (default 250 ms).
   */
  waitingRoom?: {
    maxPerModel: number;
    timeoutMs: number;
    heartbeatMs?: number;
    wakeEveryMs?: number;
    refreshMs?: number;
  };
  /** How replicas are picked (the router's policy, bounds and pick hook); the defaults serve. */
  routing?: Pick<RouterOptions, 'policy' | 'pick' | 'affinityBound' | 'prefixBound' | 'prefixMaxBlocks'>;
  /** Where keys' rpm and tpm are counted: in this process by default; a gateway worker asks its primary. */
  limits?: KeyLimits;
}
