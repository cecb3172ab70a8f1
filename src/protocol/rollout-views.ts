/** How the API shows a change rolling over a model's replicas; shared by the server and its clients. */

/**
 * A change that starts a model's replicas again (`ctl model gpus`, `ctl model context`,
 * `ctl replica restart`): `surge` starts each successor beside the replica it replaces, which
 * stops once that one is ready; `in-place` stops each replica first, one at a time.
 */
export interface RolloutView {
  model: string;
  /** In words: `gpus 1 → 2`, `context 8192 → 32768`, `restart of qwen-3`. */
  change: string;
  mode: 'surge' | 'in-place';
  /** The key that made the change. */
  by: string;
  started_at: string;
  /** `rolling` until every replica runs the change; `failed` when a successor failed to start. */
  state: 'rolling' | 'done' | 'failed';
  /** Replicas running the change, of those the model wants. */
  replaced: number;
  total: number;
  finished_at?: string;
  /** When failed: the new replica and its engine's last error. */
  error?: string;
}

export interface RollOptions {
  inPlace: boolean;
  actor: string;
  /** What changed, in words (RolloutView.change). */
  change: string;
}
