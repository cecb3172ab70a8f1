import type { RolloutView } from '../../protocol/rollout-views.js';

/**
 * What a change does to a model's replicas, in the words both `ctl model gpus` and
 * `ctl model context` end with: none to restart, how they restart, or why the roll failed.
 */
/** What a dry run ends with: nothing done, and how many replicas the change would start again. */
export function dryRunLines(restarts: number): string[] {
  const would =
    restarts === 0
      ? 'no running replica runs what changes, so none would start again'
      : restarts === 1
        ? 'its replica would start again'
        : `its ${restarts} replicas would start again`;
  return [`Dry run: nothing stored or restarted; there is room for the change, and ${would}.`];
}

export function rollingLines(r: RolloutView): string[] {
  if (r.state === 'failed') return [`The change failed to roll: ${r.error ?? 'no reason given'}`];
  if (r.total === 0)
    return ['No running replica runs what changed, so none restarts: new ones start with the change.'];
  const one = r.total === 1;
  const them = one ? 'Its replica starts' : `Its ${r.total} replicas start`;
  return [
    r.mode === 'in-place'
      ? one
        ? `${them} again in place: it stops before its successor starts.`
        : `${them} again in place, one at a time: each stops before its successor starts.`
      : one
        ? `${them} again beside the old one, which stops once its successor is ready.`
        : `${them} again beside the old ones, each old one stopping once its successor is ready.`,
    `llmgw ctl model show ${r.model} follows the change.`,
  ];
}
