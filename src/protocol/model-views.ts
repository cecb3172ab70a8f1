import type { ModelSpec } from '../catalog/model-spec.js';
import type { Origin } from '../models/origin.js';
import type { ModelShape } from '../models/shape.js';

import type { RolloutView } from './rollout-views.js';

/** How the API shows models; shared by the server and its clients. */

export interface ModelMetadata {
  /** `config`: declared in the settings file, read-only through the API. `api`: added through it. */
  origin: 'config' | 'api';
  version?: number;
  created_at?: string;
  created_by?: string;
  updated_at?: string;
  updated_by?: string;
}

/**
 * What llmgw found of the model's source. Empty while a declared model's source is being
 * resolved; ignored when sent back, like metadata.
 */
export interface ModelStatus {
  /** The files the source resolved to, pinned (commit, ETag) with sizes and digests. */
  origin?: Origin;
  /** What the model is: read from its GGUF header or its config.json. */
  shape?: ModelShape;
  /** Why the origin or the shape is not known. */
  problem?: string;
  resolved_at?: string;
  /** The model's latest rolling change (GET /models and /models/NAME). */
  rollout?: RolloutView;
  /** An autoscaled model's count now and its last decision (GET /models/NAME). */
  scale?: ScaleView;
}

/** What the autoscaler did of a model (ctl model show's Scale section, the console's model page). */
export interface ScaleView {
  /** The count placement runs now. */
  replicas: number;
  /** The last change it made: from → to, why, with the figures it saw. */
  last_decision?: {
    at: string;
    from: number;
    to: number;
    direction: 'up' | 'down' | 'zero' | 'wake';
    reason: string;
    figures: Record<string, number>;
  };
  last_request_at?: string;
  /** The last cold start the gateways measured: first request to first token at zero. */
  cold_start?: { ms: number; at: string };
}

export type ModelView = ModelSpec & { metadata: ModelMetadata; status: ModelStatus };

/**
 * The answer to adding or changing a model: the model as stored, and `warnings` (absent when
 * none), such as that none of its profiles fits any class of the cluster.
 */
export type ModelChange = ModelView & { warnings?: string[] };

/**
 * A model as a key that is not admin reads it (GET /models, /models/NAME): what a client of it
 * needs to call it, never its source, files, profiles or nodes (an admin key reads ModelView).
 */
export interface ModelUseView {
  name: string;
  /**
   * `ready`: a replica answers now; `starting`: none yet, some on their way; `scaled_to_zero`:
   * a request wakes it; `stopped`: none is asked for; `unavailable`: none will answer by itself
   * (a request is refused at once, saying why).
   */
  state: 'ready' | 'starting' | 'scaled_to_zero' | 'stopped' | 'unavailable';
  /** Replicas that answer now (as the gateway's GET /v1/models says). */
  ready_replicas: number;
  context_length?: number;
  max_output?: number;
  /** Its LoRA adapters, asked for as `MODEL:ADAPTER`. */
  adapters: string[];
}

/** What GET /models and /models/NAME answer: the whole model to an admin key, its use to others. */
export type ModelRead = ModelView | ModelUseView;

/** Whether a model read from the API is the admin's whole view (it has a source). */
export function isModelView(m: ModelRead): m is ModelView {
  return 'source' in m;
}

/**
 * The Kubernetes objects llmgw would write for a model, written nowhere: `POST /models?dry_run=true`
 * (a definition checked as an add would be; `objects` null where engines run on agents, `note`
 * saying why) and `GET /models/NAME/manifests` (`llmgw ctl model add --dry-run -o yaml`).
 */
export interface ModelManifests {
  model: ModelSpec;
  dry_run?: true;
  objects: Record<string, unknown>[] | null;
  note?: string;
}
