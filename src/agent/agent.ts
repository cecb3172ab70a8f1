import type { Logger } from 'pino';
import WebSocket from 'ws';

import { LlmgwError, messageOf } from '../core/errors.js';
import type { NodeInventory } from '../gpu/types.js';
import {
  agentChannelPath,
  agentReconnectMaxMs,
  agentVersionHeader,
  nodeIdHeader,
  nodeNameHeader,
  serverMessageSchema,
  structureOf,
  telemetryOf,
  type AgentMessage,
  type ServerMessage,
} from '../protocol/agent-protocol.js';

import { frameText } from '../protocol/frames.js';

import { backoffDelay } from './backoff.js';
import { loadIdentity, saveIdentity, type NodeIdentity } from './identity.js';

export interface AgentOptions {
  /**
   * The control plane, `http://host:8080`, or several control planes of one cluster: the
   * agent talks to one at a time and moves to the next when it loses it.
   */
  server: string | readonly string[];
  /** A join token; needed until the node has its own credential. */
  token?: string | undefined;
  dataDir: string;
  /** The node's name; the host name by default. */
  name?: string | undefined;
  logger: Logger;
  /** What this machine has, asked again before every heartbeat. */
  inventory: () => Promise<NodeInventory>;
  backoff?: { initialMs: number; maxMs: number };
  random?: () => number;
  /** Each message after the welcome: assignments, log requests. */
  onMessage?: (m: Exclude<ServerMessage, { type: 'welcome' }>) => void;
  /** After every welcome, the first and each reconnection: time to report the current state. */
  onWelcome?: (m: Extract<ServerMessage, { type: 'welcome' }>) => void;
  /** On https: the CA (PEM) the control plane's certificate must chain to (pinned at the first join). */
  tls?: { ca: string } | undefined;
}

/** The refusal that ends an agent: a bad token, a name taken. Retrying would not help. */
export class AgentRefused extends LlmgwError {
  constructor(message: string) {
    super('unauthenticated', message);
    this.name = 'AgentRefused';
  }
}

/**
 * The node agent's link to its control plane: dials out (so nodes behind NAT join),
 * sends the inventory at start and on every change and telemetry every heartbeat, and
 * reconnects with backoff and jitter after any loss, to the next control plane of its
 * list. Engines it runs are left alone while the control plane is away, and when it moves.
 */
export class Agent {
  readonly #o: AgentOptions;
  readonly #servers: readonly string[];
  /** Which of #servers is dialled now. */
  #current = 0;
  #stopped = false;
  #ws: WebSocket | undefined;
  #wake: (() => void) | undefined;
  #identity: NodeIdentity;
  readonly #welcomed: Promise<NodeIdentity>;
  #resolveWelcomed!: (id: NodeIdentity) => void;
  #rejectWelcomed!: (e: unknown) => void;
  #loop: Promise<void> | undefined;

  constructor(options: AgentOptions) {
    this.#o = options;
    this.#servers = typeof options.server === 'string' ? [options.server] : [...options.server];
    if (this.#servers.length === 0)
      throw new LlmgwError('invalid_argument', 'the agent needs a control plane');
    this.#identity = loadIdentity(options.dataDir, options.name);
    this.#welcomed = new Promise((resolve, reject) => {
      this.#resolveWelcomed = resolve;
      this.#rejectWelcomed = reject;
    });
    this.#welcomed.catch(() => undefined);
  }

  get identity(): NodeIdentity {
    return this.#identity;
  }

  /** The control plane dialled now (or last). */
  get server(): string {
    return this.#servers[this.#current] ?? this.#servers[0] ?? '';
  }

  /** Resolves on the first welcome; rejects if the control plane refuses this node. */
  get joined(): Promise<NodeIdentity> {
    return this.#welcomed;
  }

  /** Sends a message now, if connected; false when it could not (the state is sent again after the next welcome). */
  send(m: AgentMessage): boolean {
    const ws = this.#ws;
    if (ws?.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(m));
    return true;
  }

  /** Runs until stop(), or until a refusal (the promise then rejects with AgentRefused). */
  run(): Promise<void> {
    this.#loop ??= this.#run();
    return this.#loop;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#ws?.close(1000, 'agent stopping');
    this.#wake?.();
    await this.#loop?.catch(() => undefined);
  }

  // A method, not the field: the field changes while the loop awaits.
  #isStopped(): boolean {
    return this.#stopped;
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#stopped) {
      let welcomed = false;
      let retrySame = false;
      try {
        const outcome = await this.#connectOnce();
        welcomed = outcome === 'welcomed';
        retrySame = outcome === 'rejoin';
      } catch (e) {
        if (e instanceof AgentRefused) {
          this.#rejectWelcomed(e);
          throw e;
        }
        this.#o.logger.warn({ err: messageOf(e), server: this.server }, 'control plane unreachable');
      }
      if (this.#isStopped()) break;
      attempt = welcomed ? 0 : attempt + 1;
      const delay = backoffDelay(
        attempt,
        this.#o.backoff ?? { initialMs: 500, maxMs: agentReconnectMaxMs },
        this.#o.random,
      );
      // The one lost (or never reached) may be down for long: the next of the list is tried
      // first; the backoff grows only with failures in a row, across the whole list.
      if (!retrySame) this.#current = (this.#current + 1) % this.#servers.length;
      this.#o.logger.info({ inMs: delay, server: this.server }, 'reconnecting');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.#wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }

  /**
   * One connection, from dial to close: whether it was welcomed, or ended without a welcome
   * (lost), or its credential was refused and it joins again with the token (rejoin).
   */
  async #connectOnce(): Promise<'welcomed' | 'lost' | 'rejoin'> {
    const id = this.#identity;
    const server = this.server;
    // The credential first, whichever control plane of the cluster this is (they share one
    // store); the token when there is none, or when the credential is refused below.
    const credential = id.credential;
    const secret = credential ?? this.#o.token;
    if (secret === undefined) {
      throw new AgentRefused(
        `this node has not joined ${server} yet: start the agent with --token (llmgw ctl node token makes one)`,
      );
    }
    const inventory = await this.#o.inventory();
    const url = `${server.replace(/^http/, 'ws').replace(/\/+$/, '')}${agentChannelPath}`;
    const ws = new WebSocket(url, {
      headers: {
        authorization: `Bearer ${secret}`,
        [nodeIdHeader]: id.id,
        [nodeNameHeader]: id.name,
        [agentVersionHeader]: inventory.agent_version,
      },
      handshakeTimeout: 15_000,
      ...(this.#o.tls === undefined ? {} : { ca: this.#o.tls.ca }),
    });
    this.#ws = ws;
    let welcomed = false;
    let timer: NodeJS.Timeout | undefined;
    let lastStructure = structureOf(inventory);
    let lastContact = Date.now();
    let heartbeatMs = 5000;

    const send = (m: AgentMessage) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m));
    };

    const beat = async () => {
      // A control plane that vanished without closing the connection: start over.
      if (Date.now() - lastContact > Math.max(30_000, heartbeatMs * 6)) {
        ws.terminate();
        return;
      }
      try {
        const next = await this.#o.inventory();
        const structure = structureOf(next);
        if (structure !== lastStructure) {
          lastStructure = structure;
          send({ type: 'inventory', inventory: next });
          this.#o.logger.info('inventory changed; sent');
        } else {
          send({ type: 'heartbeat', telemetry: telemetryOf(next) });
        }
      } catch (e) {
        this.#o.logger.warn({ err: messageOf(e) }, 'could not read this machine');
      }
    };

    return await new Promise<'welcomed' | 'lost' | 'rejoin'>((resolve, reject) => {
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => {
          const message = errorMessage(body) ?? `the control plane answered ${res.statusCode ?? '?'}`;
          const status = res.statusCode ?? 0;
          if (status === 401 || status === 403 || status === 409 || status === 400) {
            if (credential !== undefined && this.#o.token !== undefined) {
              // The credential is gone (node removed, database replaced): join again with the token.
              this.#o.logger.warn(
                { reason: message },
                'node credential refused; joining again with the token',
              );
              this.#identity = { id: id.id, name: id.name };
              saveIdentity(this.#o.dataDir, this.#identity);
              resolve('rejoin');
              return;
            }
            this.#o.logger.error({ reason: message }, 'the control plane refused this node');
            reject(new AgentRefused(message));
            return;
          }
          reject(new LlmgwError('unavailable', message));
        });
      });
      ws.on('open', () => {
        // stop() came while this connection was dialled, with no socket to close then.
        if (this.#isStopped()) {
          ws.close(1000, 'agent stopping');
          return;
        }
        lastContact = Date.now();
        send({ type: 'inventory', inventory });
      });
      ws.on('ping', () => (lastContact = Date.now()));
      ws.on('message', (data) => {
        lastContact = Date.now();
        let parsed;
        try {
          parsed = serverMessageSchema.safeParse(JSON.parse(frameText(data)));
        } catch {
          return;
        }
        if (!parsed.success) return;
        const m = parsed.data;
        if (m.type !== 'welcome') {
          if (welcomed) this.#o.onMessage?.(m);
          return;
        }
        {
          welcomed = true;
          heartbeatMs = m.heartbeat_ms;
          this.#identity = {
            id: m.node.id,
            name: m.node.name,
            server,
            credential: m.credential ?? this.#identity.credential,
          };
          if (m.credential !== undefined || id.server !== server)
            saveIdentity(this.#o.dataDir, this.#identity);
          this.#o.logger.info(
            { node: m.node.name, server },
            m.credential === undefined ? 'connected to the control plane' : 'joined the cluster',
          );
          this.#resolveWelcomed(this.#identity);
          if (timer !== undefined) clearInterval(timer);
          timer = setInterval(() => void beat(), heartbeatMs);
          this.#o.onWelcome?.(m);
        }
      });
      ws.on('close', (code, reason) => {
        if (timer !== undefined) clearInterval(timer);
        if (code === 4401) {
          reject(new AgentRefused(reason.toString() || 'the control plane refused this node'));
          return;
        }
        if (welcomed)
          this.#o.logger.warn(
            { code, reason: reason.toString(), server },
            'disconnected from the control plane',
          );
        resolve(welcomed ? 'welcomed' : 'lost');
      });
      ws.on('error', (e) => {
        // 'close' follows; an error before the upgrade has no close of its own.
        if (ws.readyState === WebSocket.CLOSED || ws.readyState === WebSocket.CONNECTING)
          reject(new LlmgwError('unavailable', e.message));
      });
    });
  }
}

function errorMessage(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } };
    return typeof parsed.error?.message === 'string' ? parsed.error.message : undefined;
  } catch {
    return undefined;
  }
}
