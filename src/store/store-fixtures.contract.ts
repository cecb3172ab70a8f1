import { createHash } from 'node:crypto';

import type { ModelSpec } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';
import type { Origin } from '../models/origin.js';
import { known, unknown, type ModelShape } from '../models/shape.js';

import type { ModelOriginRecord, Store } from './store.js';

// What the store contract's parts share: its harness, and the records its cases write and expect.

/**
 * What every Store must do, run against each implementation. `open` gives a fresh,
 * migrated store on its own database; `reopen` a second store on the same database
 * (another control plane, or the same one after a restart).
 */
export interface StoreHarness {
  open: () => Promise<Store>;
  reopen: () => Promise<Store>;
  /** Adds a migration this build does not know, as a newer llmgw would have. */
  addUnknownMigration: (name: string) => Promise<void>;
  cleanup: () => Promise<void>;
}

export interface ContractOptions {
  /**
   * Whether several control planes may share the database. SQLite is embedded: one
   * control plane owns the file (and a second connection in the same thread would
   * block the event loop waiting for the first).
   */
  shared: boolean;
}

/** What a part of the contract reads: the store and harness of the suite, opened in its beforeAll. */
export interface Contract {
  readonly store: Store;
  readonly harness: StoreHarness;
  readonly options: ContractOptions;
}

export const spec = (name: string, extra: Partial<ModelSpec> = {}): ModelSpec => ({
  name,
  source: '/models/tiny.gguf',
  replicas: 1,
  profiles: [
    {
      name: 'cpu',
      engine: 'llamacpp',
      cpu: true,
      tp: 1,
      pp: 1,
      gpus_per_node: 0,
      nodes: 1,
      args: [],
      env: {},
      adapters: [],
    },
  ],
  ...extra,
});

export const origin: Origin = {
  source: 'hf://org/repo/m-Q4_K_M.gguf',
  kind: 'hf',
  repo: 'org/repo',
  revision: 'main',
  commit: 'a'.repeat(40),
  files: [{ path: 'm-Q4_K_M.gguf', size: 4_920_000_000, sha256: 'b'.repeat(64) }],
};

const shape: ModelShape = {
  from: 'gguf',
  architecture: 'llama',
  layers: known(32),
  attentionHeads: known(32),
  kvHeads: known(8),
  keyHeadDim: known(128),
  valueHeadDim: known(128),
  slidingWindow: known(null),
  mla: known(null),
  trainedContext: known(131072),
  parameters: unknown('the header gives no parameter count'),
  weightBytes: known(4_920_000_000),
  dtype: known('Q4_K_M'),
  kv: known({ elementBytes: 2, perToken: 131072, fullPerToken: 131072, slidingPerToken: 0 }),
};

export const record = (model: string, extra: Partial<ModelOriginRecord> = {}): ModelOriginRecord => ({
  model,
  source: origin.source,
  origin,
  shape,
  problem: null,
  resolved_at: '2026-01-02T03:04:05.000Z',
  ...extra,
});

export const hash = (s: string) => createHash('sha256').update(s).digest('hex');

export async function refusal(p: Promise<unknown>): Promise<LlmgwError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof LlmgwError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}
