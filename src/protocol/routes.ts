import type { EngineName } from '../catalog/model-spec.js';

/**
 * What a gateway needs to route: the ready replicas of each model, and every model of
 * the catalog (to tell "unknown model" from "no replica ready"). Served by the control
 * plane to its own gateway in process, and to gateways of their own over the API.
 */

export interface RouteReplica {
  id: string;
  /** The catalog name clients ask for. */
  model: string;
  engine: EngineName;
  /**
   * `http://host:port`: the engine itself; or `https://node:port/r/<replica>`: the engine
   * proxy of its node, which forwards to the engine on the node's loopback.
   */
  endpoint: string;
  /** The engine's key: sent on every request and scrape. */
  apiKey: string;
  /** The engine's own name for the model (what the request's `model` becomes). */
  servedName: string;
  /** LoRA adapters in load order (llama.cpp addresses adapter i as id i). */
  adapters: string[];
  /**
   * Requests it computes at once (llama.cpp: its slots; vLLM: max_num_seqs). Past this
   * many of the gateway's own requests in flight it counts as full, and new requests
   * wait in the gateway's queue rather than pile up in the engine.
   */
  capacity: number;
  /** The Prometheus names of its load. */
  loadMetrics: RouteLoadMetrics;
  /** Where its metrics are. */
  metricsUrl: string;
  /**
   * Its engine's health path, under `endpoint` (`/health`): asked after it answers a request
   * with a 5xx, to tell a request it could not take from a replica that is failing.
   */
  healthPath: string;
}

/**
 * An engine's own Prometheus names for its load, as the route table carries them. The wire
 * states its own shape (the engine modules sit beside protocol, not below it); the fleet
 * fills it from each engine's `loadMetrics`, so the compiler holds the two together.
 */
export interface RouteLoadMetrics {
  /** Requests being computed now. */
  running: string;
  /** Requests queued in the engine. */
  waiting: string;
  /** KV cache use, 0..1, where the engine reports one. */
  kvUsage?: string;
}

export interface CatalogEntry {
  name: string;
  /** Adapters of any of its profiles, served as `MODEL:ADAPTER`. */
  adapters: string[];
  /** Engines its profiles use. */
  engines: string[];
  context_length?: number;
  /** Why no replica of it is ready or on its way (all failed, or none has room): requests are refused at once with this. */
  unavailable?: string;
  /**
   * No replica is ready, and one comes back by itself: its launcher starts its failed engine
   * again at `at` (ISO), or it is loading again now (no `at`). Requests wait in the gateway's
   * queue for it (gateway.queue.timeout_s) rather than being refused; `reason` says why it is down.
   */
  restarting?: { at?: string; reason: string };
  /**
   * Autoscaled with `min: 0`: at zero (or starting), a request waits in the gateway's waiting
   * room and wakes it (ScaleSignals.wake) instead of being refused.
   */
  wakeable?: boolean;
}

export interface RouteTable {
  replicas: RouteReplica[];
  models: CatalogEntry[];
  /** The cluster CA (PEM) that `https://` endpoints' certificates chain to; unset, the system's CAs. */
  ca?: string;
}

/** What a gateway of its own learns of a key from the control plane. */
export interface KeyInfo {
  name: string;
  role: 'admin' | 'user' | 'gateway' | 'metrics';
  allowed_models: string[] | null;
  rpm: number | null;
  tpm: number | null;
}
