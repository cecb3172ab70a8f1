import type { AgentMessage, ServerMessage, ShardStatusWire } from '../protocol/agent-protocol.js';

import type { EngineRunner } from './engine-runners.js';

type LogsRequest = Extract<ServerMessage, { type: 'logs' }>;

export interface LogRelayOptions {
  runner: Pick<EngineRunner, 'statuses' | 'logs' | 'follow'>;
  send: (m: AgentMessage) => boolean;
  /** A shard that could not be turned into a run (an install that failed, weights missing). */
  blocked: (key: string) => ShardStatusWire | undefined;
  /** `node NAME`, or `this node`. */
  nodeName: () => string;
}

/**
 * Answers the control plane's `logs` requests: a shard's last lines, then (when followed)
 * its new ones in batches, until the request is cancelled.
 */
export class LogRelay {
  readonly #o: LogRelayOptions;
  readonly #follows = new Map<string, () => void>();

  constructor(options: LogRelayOptions) {
    this.#o = options;
  }

  /** Stops following for `request`. */
  cancel(request: string): void {
    this.#follows.get(request)?.();
    this.#follows.delete(request);
  }

  /** Stops every follow. */
  close(): void {
    for (const cancel of this.#follows.values()) cancel();
  }

  handle(m: LogsRequest): void {
    const status = this.#o.runner.statuses().find((s) => s.key === m.key);
    if (status === undefined) {
      const blocked = this.#o.blocked(m.key);
      // Its engine never started (an install that failed, weights missing): why is its log.
      const error =
        blocked === undefined
          ? `${this.#o.nodeName()} has no shard ${m.key}: the assignment that places it there has not reached its agent yet, or it was just removed; try again in a few seconds`
          : undefined;
      const lines =
        blocked === undefined
          ? []
          : [notRunning(`the engine has not started: ${blocked.reason ?? blocked.state}`)];
      this.#o.send({
        type: 'log_lines',
        request: m.request,
        lines,
        done: true,
        ...(error === undefined ? {} : { error }),
      });
      return;
    }
    const lines = this.#o.runner.logs(m.key, m.tail);
    // No process runs (it could not be started, or waits to start again): say why after what it last wrote.
    if (status.pid === undefined && status.reason !== undefined && status.state === 'failed') {
      lines.push(notRunning(`the engine is not running: ${status.reason}`));
    }
    this.#o.send({ type: 'log_lines', request: m.request, lines, done: !m.follow });
    if (!m.follow) return;
    let batch: string[] = [];
    let timer: NodeJS.Timeout | undefined;
    const flush = () => {
      timer = undefined;
      if (batch.length === 0) return;
      const lines = batch;
      batch = [];
      this.#o.send({ type: 'log_lines', request: m.request, lines, done: false });
    };
    const unfollow = this.#o.runner.follow(m.key, (line) => {
      batch.push(line);
      timer ??= setTimeout(flush, 100);
    });
    this.#follows.set(m.request, () => {
      unfollow();
      if (timer !== undefined) clearTimeout(timer);
    });
  }
}

/** A line of the agent's own in a log it sends, marked as the supervisor's notes in log files are. */
function notRunning(text: string): string {
  return `--- llmgw: ${text}`;
}
