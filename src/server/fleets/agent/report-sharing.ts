import type { Logger } from 'pino';

import { messageOf } from '../../../core/errors.js';
import type { Store } from '../../../store/store.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';

import type { AgentReports, ShardReport } from './reports.js';

/**
 * Control planes on one PostgreSQL database share what their agents report: each writes the
 * reports of the nodes connected to it (a few at a time) and takes the others' reports of the
 * nodes not connected to it as if their agents had said them here.
 */
export class ReportSharing {
  readonly #store: Store;
  readonly #registry: NodeRegistry;
  readonly #reports: AgentReports;
  readonly #logger: Logger;
  readonly #me: string | undefined;
  /** Reports of nodes connected here, waiting to be written for the other control planes. */
  readonly #unshared = new Map<string, ShardReport>();
  #timer: NodeJS.Timeout | undefined;
  #sharing: Promise<void> = Promise.resolve();
  /** Nodes whose agents report to another control plane, by the id of that one. */
  readonly #reportedTo = new Map<string, string>();

  constructor(o: {
    store: Store;
    registry: NodeRegistry;
    reports: AgentReports;
    logger: Logger;
    controlPlaneId?: string | undefined;
  }) {
    this.#store = o.store;
    this.#registry = o.registry;
    this.#reports = o.reports;
    this.#logger = o.logger;
    this.#me = o.controlPlaneId;
  }

  /** The control plane a node's agent reports to, when another one. */
  reportedTo(nodeId: string): string | undefined {
    return this.#reportedTo.get(nodeId);
  }

  /** Writes a report of a node connected here for the other control planes, a few at a time. */
  share(nodeId: string, report: ShardReport): void {
    this.#unshared.set(nodeId, report);
    this.#timer ??= setTimeout(() => void this.flush(), 100);
  }

  flush(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#unshared.size === 0) return this.#sharing;
    const batch = [...this.#unshared];
    this.#unshared.clear();
    const by = this.#me ?? '';
    const at = new Date().toISOString();
    this.#sharing = this.#sharing
      .then(() =>
        this.#store.transaction(async (tx) => {
          for (const [node, report] of batch) await tx.cluster.putReport({ node, by, at, report });
          // The nodes' ids, when they fit a notification; else the listeners read every report.
          const ids = batch.map(([node]) => node).join(',');
          await tx.cluster.notify('reports', ids.length < 7000 ? `${by};${ids}` : `${by};`);
        }),
      )
      .catch((e: unknown) => this.#logger.warn({ err: messageOf(e) }, "could not share the nodes' reports"));
    return this.#sharing;
  }

  /**
   * Reports other control planes wrote (payload `CP;ID,ID`; empty or `resync`: all of them):
   * those of nodes not connected here are taken as if their agents had said them here.
   */
  async load(payload: string): Promise<void> {
    const [from, list] = payload.split(';');
    if (from !== undefined && from === this.#me && list !== undefined) return;
    const wanted = list === undefined || list === '' ? undefined : new Set(list.split(','));
    let reports;
    try {
      reports = await this.#store.cluster.reports();
    } catch (e) {
      this.#logger.warn({ err: messageOf(e) }, "could not read the nodes' reports");
      return;
    }
    for (const r of reports) {
      if (r.by !== this.#me) this.#reportedTo.set(r.node, r.by);
      if (r.by === this.#me || this.#registry.isConnected(r.node)) continue;
      if (wanted !== undefined && !wanted.has(r.node)) continue;
      const report = r.report as ShardReport;
      if (!Array.isArray(report.statuses)) continue;
      this.#reports.ingest(r.node, report, false);
    }
  }
}
