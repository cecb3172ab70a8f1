import type { AgentMessage, EngineReport, ShardStatusWire } from '../protocol/agent-protocol.js';

import type { EngineRunner } from './engine-runners.js';
import type { PortsReport } from './ports-report.js';

export interface ShardReportOptions {
  runner: Pick<EngineRunner, 'statuses'>;
  send: (m: AgentMessage) => boolean;
  /** Shards that have no run yet: blocked (an install, missing weights) or waiting for their files. */
  pending: () => ShardStatusWire[];
  ports: PortsReport;
  /** The engines the agent installs, as they are. */
  engines: () => EngineReport;
}

/**
 * The `shards` message: every shard's state, the engines the agent installed and the ports
 * other programs hold. Changes come in bursts (a start is several transitions): one message
 * for each burst.
 */
export class ShardReport {
  readonly #o: ShardReportOptions;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ShardReportOptions) {
    this.#o = options;
  }

  /** Sends the report soon (after a reconnection, and after any change). */
  schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const statuses = [...this.#o.runner.statuses(), ...this.#o.pending()];
      const ports = this.#o.ports.forReport();
      this.#o.send({
        type: 'shards',
        statuses,
        engines: this.#o.engines(),
        ...(ports === undefined ? {} : { ports_taken: ports }),
      });
    }, 50);
    this.#timer.unref();
  }
}
