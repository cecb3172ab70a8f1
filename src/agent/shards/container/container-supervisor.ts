import { ShardSupervisor, type ShardSupervisorOptions } from '../supervisor.js';
import { ContainerDriver } from './container-driver.js';
import type { ContainerInstance } from './container-instance.js';
import type { DaemonClient } from './daemon.js';

export interface ContainerSupervisorOptions extends ShardSupervisorOptions {
  /** The daemon: a client, or how to connect (asked again after a failure, so a daemon started later is found). */
  client: DaemonClient | (() => Promise<DaemonClient>);
  /** This node's id: the `llmgw.node` label of its containers, the only ones it adopts or removes. */
  node: string;
  /** This node's llmgw containers that no shard claims are removed after this long (default 300 s). */
  orphanGraceMs?: number;
  /** How often the node's containers are listed for orphans (default 30 s). */
  sweepIntervalMs?: number;
  /** After a refusal a person must act on (no NVIDIA runtime, an image that cannot come): default 5 min. */
  refusedRetryMs?: number;
  /** Lines kept per shard (default 2000). */
  logLines?: number;
}

/**
 * The agent's container supervisor: the shard supervisor with the container driver, which
 * runs each container shard placed on this node as a container of the node's Docker or
 * Podman daemon, with the same reports as the process supervisor.
 *
 * At construction it lists this node's llmgw containers (label `llmgw.node`): a running
 * one whose `llmgw.hash` matches the desired run of its shard is adopted (its logs followed
 * from its last lines, not restarted); one that does not match is removed before its
 * replacement starts; exited ones are removed. Containers of this node that no shard owns
 * are removed once they have been seen unowned for `orphanGraceMs`.
 */
export class ContainerSupervisor extends ShardSupervisor<ContainerInstance> {
  readonly #driver: ContainerDriver;

  constructor(options: ContainerSupervisorOptions) {
    const now = options.now ?? Date.now;
    const driver = new ContainerDriver({
      client: options.client,
      node: options.node,
      orphanGraceMs: options.orphanGraceMs ?? 300_000,
      sweepIntervalMs: options.sweepIntervalMs ?? 30_000,
      refusedRetryMs: options.refusedRetryMs ?? 5 * 60_000,
      logLines: options.logLines ?? 2000,
      now: () => now(),
    });
    super(driver, options);
    this.#driver = driver;
  }

  /** Resolves once the node's containers have been listed (adoption decided); never rejects. */
  surveyed(): Promise<void> {
    return this.#driver.leftovers.surveyed();
  }

  /**
   * Lists this node's containers and removes those no shard owns that have been seen
   * unowned for the grace; the timer calls it, tests may too.
   */
  sweep(): Promise<void> {
    return this.#driver.leftovers.sweep();
  }
}
