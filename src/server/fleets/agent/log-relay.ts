import { randomUUID } from 'node:crypto';

import { LlmgwError } from '../../../core/errors.js';
import type { AgentMessage } from '../../../protocol/agent-protocol.js';
import type { AgentHub } from '../../nodes/agent-hub.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import type { LogOptions } from '../fleet.js';

import type { Placed } from './placed.js';
import { unknownReplica } from './replica-views.js';

interface LogRequest {
  nodeId: string;
  onLines: (lines: string[]) => void;
  onDone: (error?: string) => void;
}

export interface LogRelayOptions {
  placed: Placed;
  registry: NodeRegistry;
  hub: AgentHub;
  /** The control plane a node's agent reports to, when another one. */
  reportedTo: (nodeId: string) => string | undefined;
}

/** A shard's engine log, asked of the agent of its node and relayed as it answers. */
export class LogRelay {
  readonly #o: LogRelayOptions;
  readonly #requests = new Map<string, LogRequest>();

  constructor(o: LogRelayOptions) {
    this.#o = o;
  }

  /** A shard's log: the last `tail` lines, then (follow) each new one until `signal` aborts. */
  logs(id: string, options: LogOptions): Promise<void> {
    const { placed, registry, hub } = this.#o;
    const shard = placed.shards.find((s) => s.replica === id && s.rank === options.rank);
    if (shard === undefined) {
      const exists = placed.replica(id) !== undefined;
      return Promise.reject(
        exists
          ? new LlmgwError('not_found', `replica ${id} has no rank ${options.rank}`)
          : unknownReplica(id),
      );
    }
    // The engine's log lives on its node: a node that cannot answer now is a conflict with
    // the replica's state (409), not a store that does not answer (503).
    const node = registry.views().find((v) => v.name === shard.node);
    if (node === undefined)
      return Promise.reject(
        new LlmgwError(
          'conflict',
          `node ${shard.node}, where replica ${id} runs, is not known to this control plane: its logs cannot be read (llmgw ctl nodes lists the nodes)`,
        ),
      );
    const request = randomUUID();
    return new Promise((resolve, reject) => {
      this.#requests.set(request, {
        nodeId: node.id,
        onLines: options.onLines,
        onDone: (error) => (error === undefined ? resolve() : reject(new LlmgwError('conflict', error))),
      });
      const sent = hub.send(node.id, {
        type: 'logs',
        request,
        key: `${id}/${options.rank}`,
        tail: options.tail,
        follow: options.follow,
      });
      if (!sent) {
        this.#requests.delete(request);
        const elsewhere = this.#o.reportedTo(node.id);
        reject(
          new LlmgwError(
            'conflict',
            elsewhere !== undefined && node.state === 'ready'
              ? `node ${shard.node}'s agent is connected to control plane ${elsewhere}, not this one: read the logs of replica ${id} through that one (llmgw ctl status lists the control planes and their URLs)`
              : `node ${shard.node} is not connected to this control plane, so the logs of replica ${id} cannot be read now: start its agent (llmgw ctl nodes says when it was last seen)`,
          ),
        );
        return;
      }
      options.signal.addEventListener('abort', () => {
        if (!this.#requests.has(request)) return;
        this.#requests.delete(request);
        hub.send(node.id, { type: 'logs_cancel', request });
        resolve();
      });
    });
  }

  /** Lines an agent sent for a request of this control plane's. */
  answer(m: Extract<AgentMessage, { type: 'log_lines' }>): void {
    const req = this.#requests.get(m.request);
    if (req === undefined) return;
    if (m.lines.length > 0) req.onLines(m.lines);
    if (m.done) {
      this.#requests.delete(m.request);
      req.onDone(m.error);
    }
  }

  /** The node's agent left: its logs being read end, with why. */
  nodeGone(nodeId: string): void {
    for (const [id, r] of this.#requests) {
      if (r.nodeId === nodeId) {
        r.onDone('the node disconnected');
        this.#requests.delete(id);
      }
    }
  }
}
