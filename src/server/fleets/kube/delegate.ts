import type { NodeView } from '../../../protocol/node-views.js';
import type { ReplicaView, RestartResult } from '../../../protocol/replica-views.js';
import type { RouteTable } from '../../../protocol/routes.js';

/**
 * What the Fleet hands over when something else places replicas (Kubernetes mode): the
 * replicas, the routes, restarts and logs. What does not apply there (pulls to a node, node
 * caches) is refused by the Fleet with `refusal`.
 */
export interface FleetDelegate {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Reconciles soon; calls close together run once. */
  poke(): void;
  /** Reconciles now (a change made through this control plane). */
  reconcile(): Promise<void>;
  settled(): Promise<void>;
  replicas(model?: string): ReplicaView[];
  replica(id: string): ReplicaView;
  routeTable(): Promise<RouteTable>;
  restart(id: string, inPlace: boolean, actor: string): Promise<RestartResult>;
  /** A shard's engine log, as Fleet.logs: the last `tail` lines, then (follow) new ones until `signal` aborts. */
  logs(
    id: string,
    options: {
      rank: number;
      tail: number;
      follow: boolean;
      signal: AbortSignal;
      onLines: (lines: string[]) => void;
    },
  ): Promise<void>;
  /** The nodes as llmgw shows them, read-only. */
  nodeViews(): NodeView[];
  /** Why agent-only operations are refused, with what to do instead. */
  refusal(operation: string): string;
}
