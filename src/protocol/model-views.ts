import type { ModelSpec } from '../catalog/model-spec.js';

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

export type ModelView = ModelSpec & { metadata: ModelMetadata };
