import type { PortTaken } from '../types.js';
import { describeHolder, findHolder, portUse, type Holder, type Listener } from './sockets.js';

/**
 * Who listens on a shard's port when it is not one of this node's engines: finding the
 * holder scans every process, so the last one found for a set of sockets is kept.
 */
export class PortHolders {
  #last: { inodes: string; holder: Holder | undefined } | undefined;

  /** Whether a program not among `own` listens on `port`, and who, in words. */
  takenBy(port: number, own: Iterable<number>): { reason: string; taken: PortTaken } | undefined {
    const others = portUse(port, own)?.others ?? [];
    if (others.length === 0) return undefined;
    const holder = this.holderOf(others, new Set(own));
    return {
      reason: `port ${port} is taken by ${describeHolder(holder, others)}`,
      taken: { port, ...(holder === undefined ? {} : { pid: holder.pid, name: holder.name }) },
    };
  }

  holderOf(listeners: readonly Listener[], skip: ReadonlySet<number>): Holder | undefined {
    const inodes = listeners
      .map((l) => l.inode)
      .sort((a, b) => a - b)
      .join(',');
    if (this.#last?.inodes !== inodes)
      this.#last = { inodes, holder: findHolder(new Set(listeners.map((l) => l.inode)), skip) };
    return this.#last.holder;
  }
}
