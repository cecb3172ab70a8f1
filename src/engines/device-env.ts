import { LlmgwError } from '../core/errors.js';

import type { ShardDevice, ShardLaunch } from './types.js';

/**
 * The environment that pins a shard to its devices. CUDA is told by UUID, never by
 * index: CUDA enumerates the fastest card first unless CUDA_DEVICE_ORDER says otherwise,
 * so an index would name a different card than nvidia-smi's, and a MIG instance has no
 * index at all (`MIG-<uuid>` is the only way to open one).
 */

/** Whether the shard runs on a MIG instance. */
export function onMig(devices: readonly ShardDevice[]): boolean {
  return devices.some((d) => d.mig !== undefined);
}

/**
 * CUDA_VISIBLE_DEVICES for these devices. Empty on a CPU shard: a GPU build of an engine
 * then sees no card, rather than taking memory on cards placement gave to other shards.
 * Throws when a MIG shard was given more than one instance: a CUDA process opens only one
 * MIG device, and would run on the first without a word about the rest.
 */
export function cudaVisibleDevices(devices: readonly ShardDevice[]): string {
  if (onMig(devices) && devices.length > 1) {
    throw new LlmgwError(
      'invalid_argument',
      `a shard on MIG runs on exactly one instance, but was given ${devices.length} (${devices.map((d) => d.label).join(', ')}): place it on one instance`,
    );
  }
  return devices.map((d) => d.uuid).join(',');
}

/**
 * The profile's own environment, then what placement and the gateway set, which wins
 * (the catalog already refuses a profile that sets those names).
 */
export function shardEnv(
  launch: Pick<ShardLaunch, 'profile' | 'devices'>,
  own: Record<string, string> = {},
): Record<string, string> {
  return { ...launch.profile.env, CUDA_VISIBLE_DEVICES: cudaVisibleDevices(launch.devices), ...own };
}
