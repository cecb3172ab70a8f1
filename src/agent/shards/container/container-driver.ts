import { randomBytes } from 'node:crypto';

import type { AttemptContext, Claim, Ending, ShardDriver } from '../driver.js';
import { LogBuffer } from '../log-buffer.js';
import type { ShardRun } from '../types.js';
import { ContainerInstance, type ContainerInstanceContext } from './container-instance.js';
import { ContainerLeftovers } from './container-leftovers.js';
import { DaemonError, type DaemonClient } from './daemon.js';
import { createContainer, gpuRuntimeReason, removeContainer, startContainer } from './operations.js';
import { ensureImage } from './pull.js';
import { ContainerRefusal, containerHash, containerSpec } from './requests.js';
import type { DaemonKind } from './types.js';

export interface ContainerDriverOptions {
  /** The daemon: a client, or how to connect (asked again after a failure, so a daemon started later is found). */
  client: DaemonClient | (() => Promise<DaemonClient>);
  /** This node's id: the `llmgw.node` label of its containers, the only ones it adopts or removes. */
  node: string;
  orphanGraceMs: number;
  sweepIntervalMs: number;
  /** After a refusal a person must act on (no NVIDIA runtime, an image that cannot come). */
  refusedRetryMs: number;
  /** Lines kept per shard. */
  logLines: number;
  now: () => number;
}

/**
 * Runs a shard's engine as a container of the node's Docker or Podman daemon: pull,
 * create, start, and at its end remove (the daemon's restart policy is `no`: restarts are
 * the lifecycle's, with its backoff). Takes over a running container an earlier agent left
 * whose `llmgw.hash` label matches the run wanted now.
 */
export class ContainerDriver implements ShardDriver<ContainerInstance> {
  readonly previousWords = 'the previous container of this shard to be removed';
  readonly leftovers: ContainerLeftovers;
  readonly #o: ContainerDriverOptions;
  readonly #instances: ContainerInstanceContext;
  #client: Promise<DaemonClient> | undefined;

  constructor(options: ContainerDriverOptions) {
    this.#o = options;
    this.leftovers = new ContainerLeftovers({
      connect: () => this.#connect(),
      node: options.node,
      orphanGraceMs: options.orphanGraceMs,
      sweepIntervalMs: options.sweepIntervalMs,
      now: options.now,
    });
    this.#instances = { disown: (id) => this.leftovers.disown(id), now: options.now };
  }

  hash(run: ShardRun): string {
    return containerHash(run);
  }

  check(run: ShardRun): void {
    if (run.container === undefined)
      throw new Error(`shard ${run.key} is not a container run: the process supervisor runs it`);
  }

  log(): LogBuffer {
    // In memory only: the lines come from the daemon's log stream, not from a file the engine writes.
    return new LogBuffer({ lines: this.#o.logLines, maxFileBytes: Number.MAX_SAFE_INTEGER });
  }

  claim(run: ShardRun, hash: string): Claim<ContainerInstance> {
    return {
      later: async () => {
        const id = await this.leftovers.claim(run.key, hash);
        if (id === undefined) return undefined;
        try {
          return new ContainerInstance(this.#instances, await this.#connect(), id);
        } catch {
          // The daemon went away since the survey: a new container is made once it answers.
          this.leftovers.disown(id);
          return undefined;
        }
      },
    };
  }

  async start(a: AttemptContext): Promise<ContainerInstance | Ending | undefined> {
    let client: DaemonClient;
    try {
      client = await this.#connect();
    } catch (e) {
      return { reason: e instanceof Error ? e.message : String(e) };
    }
    const made = await this.#create(client, a);
    if (made === undefined || 'reason' in made) return made;
    return new ContainerInstance(this.#instances, client, made.id);
  }

  unclaimed(): string[] {
    return this.leftovers.unclaimed();
  }

  releaseUnclaimed(keep: (key: string) => boolean): string[] {
    return this.leftovers.release(keep);
  }

  discardLeftovers(): Promise<void> {
    return this.leftovers.discard();
  }

  pending(): Promise<void>[] {
    return this.leftovers.pending();
  }

  close(): void {
    this.leftovers.close();
  }

  detach(): void {
    this.leftovers.detach();
  }

  #connect(): Promise<DaemonClient> {
    const client = this.#o.client;
    if (typeof client !== 'function') return Promise.resolve(client);
    if (this.#client === undefined) {
      const p = client();
      this.#client = p;
      p.catch(() => {
        if (this.#client === p) this.#client = undefined;
      });
    }
    return this.#client;
  }

  /** Image, create, start; an Ending when it did not come to a running container. */
  async #create(client: DaemonClient, a: AttemptContext): Promise<{ id: string } | Ending | undefined> {
    const run = a.run;
    const stopping = () => a.signal.aborted;
    let spec;
    try {
      spec = containerSpec(run, { node: this.#o.node, attempt: randomBytes(3).toString('hex') });
    } catch (e) {
      if (e instanceof ContainerRefusal) return { reason: e.message, retry: 'final' };
      throw e;
    }
    const container = spec.container;
    try {
      a.set('starting', `looking for image ${container.image}`);
      await ensureImage(client, container, {
        signal: a.signal,
        onProgress: (p) => {
          a.set('downloading', `pulling image ${container.image}`, { download: p });
        },
        onNote: (text) => {
          a.log.push(`[llmgw] ${text}`);
        },
      });
    } catch (e) {
      if (stopping()) return undefined;
      if (e instanceof ContainerRefusal) return { reason: e.message, retry: this.#o.refusedRetryMs };
      return { reason: `cannot get image ${container.image}: ${e instanceof Error ? e.message : String(e)}` };
    }
    if (stopping()) return undefined;
    a.set('starting', 'starting the container');
    let id: string;
    try {
      id = await createContainer(client, spec);
    } catch (e) {
      if (e instanceof ContainerRefusal) return { reason: e.message, retry: 'final' };
      return daemonFailure('cannot create the container', e, client.kind, this.#o.refusedRetryMs);
    }
    this.leftovers.own(id);
    try {
      await startContainer(client, id);
    } catch (e) {
      await removeContainer(client, id).catch(() => undefined);
      this.leftovers.disown(id);
      return daemonFailure('cannot start the container', e, client.kind, this.#o.refusedRetryMs);
    }
    // Stopped meanwhile: the attempt's stop path removes it.
    return { id };
  }
}

/** A daemon's refusal to create or start: a missing GPU runtime waits long (a person must act), others back off. */
function daemonFailure(what: string, e: unknown, kind: DaemonKind, refusedRetryMs: number): Ending {
  const message = e instanceof Error ? e.message : String(e);
  const gpu = gpuRuntimeReason(message, kind);
  if (gpu !== undefined) return { reason: gpu, retry: refusedRetryMs };
  return { reason: `${what}: ${e instanceof DaemonError ? `the daemon says: ${message}` : message}` };
}
