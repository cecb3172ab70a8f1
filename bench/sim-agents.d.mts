// Types of sim-agents.mjs, for the tests that use it.
export type FailureKind = 'reset' | 'refused' | 'timeout' | 'status' | 'other';
export type Failures = Record<FailureKind, number>;

export interface SimAgentOptions {
  /** The control plane: http://host:port. */
  url: string;
  /** A join token (llmgw_join_...). */
  secret: string;
  /** Waited before a dial: attempt 0 after a welcomed connection ended, then 1, 2, ... */
  retryDelay: (attempt: number) => number;
  name: string;
  id?: string;
  cards?: number;
  /** Heartbeats after the welcome; none when unset. */
  heartbeatMs?: number;
  handshakeMs?: number;
  /** The local address it dials from (a loopback address of its own). */
  sourceAddress?: string;
}

export declare class SimAgent {
  constructor(o: SimAgentOptions);
  readonly name: string;
  readonly id: string;
  credential: string | undefined;
  failures: Failures;
  lastFailure: string | undefined;
  dials: number;
  welcomes: number;
  connected: boolean;
  welcomedAt: number | undefined;
  fatal: string | undefined;
  start(): this;
  welcomed(): Promise<void>;
  stop(): void;
}

export declare function simInventory(name: string, cards?: number): unknown;
export declare function simTelemetry(cards?: number): unknown;
export declare function loopbackSource(i: number): string;
export declare function startSimAgents(
  o: Omit<SimAgentOptions, 'name' | 'sourceAddress'> & {
    count: number;
    prefix?: string;
    loopbackSources?: boolean;
  },
): SimAgent[];
export declare function failuresOf(agents: readonly SimAgent[]): Failures;
export declare function waitAllJoined(
  agents: readonly SimAgent[],
  o: { since: number; deadlineMs: number },
): Promise<{ lastJoinMs: number; missing: SimAgent[] }>;
