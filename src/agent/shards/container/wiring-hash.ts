import { createHash } from 'node:crypto';

import { runHash, stableJson } from '../run-hash.js';
import type { ShardRun } from '../types.js';

/**
 * The `llmgw.hash` label of a shard's container: what the process supervisor's run hash
 * covers (command, health, GPUs), and the container's own shape (image, mounts, network,
 * IPC) but not its labels, which carry this hash. A container whose label differs from the
 * run wanted now runs something else: it is replaced, never adopted. The same value as the
 * container supervisor's own (requests.ts containerHash), 32 hex digits.
 */
export function containerRunHash(run: ShardRun): string {
  const { labels: _labels, ...shape } = run.container ?? {};
  return createHash('sha256')
    .update(`${runHash(run)}\n${stableJson(shape)}`)
    .digest('hex')
    .slice(0, 32);
}
