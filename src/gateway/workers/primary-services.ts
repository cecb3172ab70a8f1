import type { ScaleSignals } from '../../protocol/load-report.js';
import type { Gateway } from '../gateway.js';
import type { GatewayKeys } from '../keys.js';
import type { BreakerEvidence, BreakerSnapshot } from '../router/breaker.js';
import type { RouteSource, UsageSink } from '../services.js';

import type { Counts } from './ledger.js';
import type { MetricJson } from './metrics.js';

/** What the workers ask of the primary: the process's gateway parts, known once it has started them. */
export interface PrimaryServices {
  keys: GatewayKeys;
  routes: RouteSource;
  usage: UsageSink;
  /** Where the workers' load reports and wake-ups go (the autoscaler); without, reports are dropped and wakes refused. */
  signals?: ScaleSignals | undefined;
  /** The primary's own gateway (it serves /v1 on relayed connections): a member of the in-flight ledger, its metrics summed in. */
  local: {
    ownInFlight(): Counts;
    onInFlightChange(listener: () => void): void;
    setPeerInFlight(counts: Counts): void;
    metricsJson(): Promise<MetricJson[]>;
    /** Its breakers: the evidence it sees goes to the board, and it adopts the board's states. */
    onBreakerEvidence(listener: (replica: string, e: BreakerEvidence) => void): void;
    adoptBreakers(states: ReadonlyMap<string, BreakerSnapshot>): void;
  };
}

/** The primary's gateway as the workers' pool sees it: a member of the in-flight ledger, its metrics summed in. */
export function primaryServices(
  gateway: Gateway,
  parts: Pick<PrimaryServices, 'keys' | 'routes' | 'usage' | 'signals'>,
): PrimaryServices {
  const router = gateway.router;
  return {
    ...parts,
    local: {
      ownInFlight: () => router.ownInFlight(),
      onInFlightChange: (listener) => router.onInFlightChange(listener),
      setPeerInFlight: (counts) => router.setPeerInFlight(counts),
      metricsJson: () => gateway.metrics.registry.getMetricsAsJSON(),
      onBreakerEvidence: (listener) => router.onBreakerEvidence(listener),
      adoptBreakers: (states) => router.adoptBreakers(states),
    },
  };
}
