/**
 * What a gateway tells the control plane about the load it sees, and how it asks for a model
 * scaled to zero to be started. The autoscaler decides on these figures; the gateway in the
 * control plane's process hands them over in memory, a gateway of its own (or a gateway
 * worker) sends them over the API (POST /api/v1/gateway/load, /gateway/wake).
 */

/** One replica as the gateway sees it: the engine's own last reading and the gateway's requests. */
export interface ReplicaLoadFigures {
  id: string;
  /** Requests the engine computes now (its own metric). */
  running: number;
  /** Requests queued in the engine (its own metric). */
  waiting: number;
  /** KV cache use 0..1, where the engine reports one. */
  kvUsage?: number;
  /** Requests it computes at once (llama.cpp slots, vLLM max_num_seqs). */
  capacity: number;
  /** The gateway's own requests on it now. */
  inFlight: number;
  /** No fresh reading: the figures above are old or missing. */
  stale: boolean;
}

export interface ModelLoadFigures {
  model: string;
  /** Requests waiting in the gateway for a free replica (or, at zero, for one to start). */
  queued: number;
  /** The gateway's requests on the model's replicas now. */
  inFlight: number;
  /** Requests for the model this gateway has taken since it started (a counter). */
  requests: number;
  /** When this gateway last took a request for the model (epoch ms); unset if never. */
  lastRequestAt?: number;
  /**
   * The last cold start this gateway saw: from a request arriving for a model with no ready
   * replica to its first token (or whole answer), ms, and when it ended (epoch ms).
   */
  coldStart?: { ms: number; at: number };
  replicas: ReplicaLoadFigures[];
}

export interface GatewayLoadReport {
  /** Stable for the gateway's life (a process, or a worker of one): reports replace the last of the same id. */
  gateway: string;
  /** When it was made (epoch ms). */
  at: number;
  models: ModelLoadFigures[];
}

/** The control plane's answer to a wake: the model is (or will be) starting, or cannot start, and why. */
export type WakeAnswer = { ok: true } | { ok: false; reason: string };

/** Where a gateway sends its figures and wake-ups: the autoscaler in process, or over the API. */
export interface ScaleSignals {
  report(report: GatewayLoadReport): Promise<void>;
  wake(model: string): Promise<WakeAnswer>;
}
