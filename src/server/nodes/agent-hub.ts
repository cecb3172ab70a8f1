import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

import type { Logger } from 'pino';
import { WebSocket, WebSocketServer } from 'ws';

import { bearerToken } from '../../core/bearer.js';
import { LlmgwError, messageOf } from '../../core/errors.js';
import { dnsLabelProblem } from '../../core/names.js';
import { clientText } from '../../core/redact.js';
import { generateSecret, hashSecret } from '../../core/secrets.js';
import type { NodeInventory } from '../../gpu/types.js';
import {
  agentMessageSchema,
  agentVersionHeader,
  nodeIdHeader,
  nodeNameHeader,
  type AgentMessage,
  type ServerMessage,
} from '../../protocol/agent-protocol.js';
import type { JoinTokenRecord, NodeRecord, Store } from '../../store/store.js';
import { frameText } from '../../protocol/frames.js';

import { checkJoinToken } from './join-token.js';
import { SessionWrites } from './session-writes.js';
import type { NodeRegistry } from './node-registry.js';

export interface AgentHubOptions {
  store: Store;
  registry: NodeRegistry;
  logger: Logger;
  heartbeatMs: number;
  /** Set when this control plane takes no agents (Kubernetes mode): why, said to each agent that dials. */
  refuseAgents?: string;
  now?: () => number;
}

export interface HubListener {
  connected(nodeId: string): void;
  disconnected(nodeId: string): void;
  inventory?(nodeId: string): void;
  message(nodeId: string, m: Exclude<AgentMessage, { type: 'inventory' | 'heartbeat' }>): void;
}

/** Who is on the other end of an upgrade request, once its secret checked out. */
type Caller =
  | { kind: 'node'; node: NodeRecord }
  | { kind: 'join'; token: JoinTokenRecord; id: string; name: string; version: string };

const firstFrameMs = 15_000;

/**
 * The control plane's end of the agent channel. Agents dial in; a join token or the
 * node's own credential is checked on the upgrade request, so a refusal is a plain HTTP
 * error with a message both sides show. A token's join is written to the store only
 * when the agent's first inventory arrives, and the node's credential is handed over
 * in the welcome, once.
 */
export class AgentHub {
  readonly #o: AgentHubOptions;
  readonly #wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  readonly #sessions = new Map<string, WebSocket>();
  readonly #pinger: NodeJS.Timeout;
  #listener: HubListener | undefined;
  #nodeTls: NodeTls | undefined;
  readonly #writes: SessionWrites;

  constructor(options: AgentHubOptions) {
    this.#o = options;
    // ws's own answer to a handshake it cannot take is text; errors here are JSON, always.
    this.#wss.on('wsClientError', (e, socket) =>
      refuse(
        socket,
        new LlmgwError(
          'invalid_argument',
          `the agent channel is a WebSocket (GET with "Upgrade: websocket", Sec-WebSocket-Key and Sec-WebSocket-Version 13): ${e.message}`,
        ),
      ),
    );
    this.#writes = new SessionWrites(options.store, options.now ?? Date.now);
    // Pings find connections that died without a close (a node that lost power, a NAT that forgot).
    this.#pinger = setInterval(
      () => {
        for (const ws of this.#sessions.values()) {
          const alive = (ws as WebSocket & { alive?: boolean }).alive;
          if (alive === false) {
            ws.terminate();
            continue;
          }
          (ws as WebSocket & { alive?: boolean }).alive = false;
          ws.ping();
        }
      },
      Math.max(this.#o.heartbeatMs * 2, 1000),
    );
    this.#pinger.unref();
  }

  /**
   * Issues each node the certificate of its engine forwarder, sent in every welcome (so a
   * reconnection renews it); unset, TLS is off and none is sent.
   */
  issueNodeCertificates(issue: NodeTls): void {
    this.#nodeTls = issue;
  }

  /** Who hears what agents say beyond inventories and heartbeats (the fleet). */
  listen(listener: HubListener): void {
    this.#listener = listener;
  }

  /** Sends a message to a node's agent; false when it is not connected here. */
  send(nodeId: string, message: ServerMessage): boolean {
    const ws = this.#sessions.get(nodeId);
    if (ws?.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(message));
    return true;
  }

  get connectedCount(): number {
    return this.#sessions.size;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    this.#authenticate(req).then(
      (caller) => {
        this.#wss.handleUpgrade(req, socket, head, (ws) => {
          this.#session(ws, caller, req.socket.remoteAddress ?? 'unknown');
        });
      },
      (e: unknown) => {
        const err =
          e instanceof LlmgwError
            ? e
            : new LlmgwError('internal', 'the control plane could not check this agent');
        if (!(e instanceof LlmgwError))
          this.#o.logger.error({ err: messageOf(e) }, 'agent authentication failed');
        this.#o.logger.warn(
          {
            address: req.socket.remoteAddress,
            // The agent's own values: cut and redacted, as anyone may send anything here.
            node: clientText(String(req.headers[nodeNameHeader] ?? '')),
            reason: clientText(err.message),
          },
          'agent refused',
        );
        refuse(socket, err);
      },
    );
  }

  /** Why this control plane takes no agents, when it takes none. */
  get refusesAgents(): string | undefined {
    return this.#o.refuseAgents;
  }

  /** Ends a node's session (it was removed). */
  disconnect(id: string, why: string): void {
    this.#sessions.get(id)?.close(4001, why.slice(0, 120));
  }

  close(): void {
    clearInterval(this.#pinger);
    for (const ws of this.#sessions.values()) ws.close(1001, 'control plane stopping');
    this.#wss.close();
  }

  async #authenticate(req: IncomingMessage): Promise<Caller> {
    const secret = bearerToken(req.headers.authorization);
    const id = header(req, nodeIdHeader);
    const name = header(req, nodeNameHeader);
    const version = header(req, agentVersionHeader) ?? 'unknown';
    if (secret === undefined)
      throw new LlmgwError(
        'unauthenticated',
        'the agent sent no token: start it with --token (make one with llmgw ctl node token)',
      );
    if (id === undefined || !/^[A-Za-z0-9-]{8,64}$/.test(id))
      throw new LlmgwError(
        'invalid_argument',
        `the agent sent no valid ${nodeIdHeader} header: upgrade the agent`,
      );
    // Before any token is looked at: a refused agent joins nothing and uses no token.
    if (this.#o.refuseAgents !== undefined) throw new LlmgwError('permission_denied', this.#o.refuseAgents);
    if (secret.startsWith('llmgw_node_')) {
      const cred = await this.#o.store.nodes.findCredential(id);
      const node =
        cred !== undefined && cred.secretHash === hashSecret(secret)
          ? await this.#o.store.nodes.get(id)
          : undefined;
      if (node === undefined) {
        throw new LlmgwError(
          'unauthenticated',
          "this node's credential is not valid here (was the node removed, or the database replaced?): join it again with a token (llmgw ctl node token)",
        );
      }
      return { kind: 'node', node };
    }
    if (name === undefined)
      throw new LlmgwError(
        'invalid_argument',
        `the agent sent no ${nodeNameHeader} header: upgrade the agent`,
      );
    const nameProblem = dnsLabelProblem('node name', name);
    if (nameProblem !== undefined)
      throw new LlmgwError('invalid_argument', `${nameProblem} (start the agent with --name)`);
    const token = await checkJoinToken(this.#o.store, secret, this.#o.now?.() ?? Date.now());
    const byName = await this.#o.store.nodes.getByName(name);
    if (byName !== undefined && byName.id !== id) {
      throw new LlmgwError(
        'conflict',
        `a node named "${name}" has already joined with another identity: remove it first (llmgw ctl node rm ${name}) or start this agent with --name OTHER`,
      );
    }
    return { kind: 'join', token, id, name, version };
  }

  #tlsFor(node: string, address: string): { tls?: { cert: string; key: string; ca: string } } {
    if (this.#nodeTls === undefined) return {};
    try {
      return { tls: this.#nodeTls(node, address) };
    } catch (e) {
      this.#o.logger.error({ node, err: messageOf(e) }, 'could not issue the node its forwarder certificate');
      return {};
    }
  }

  #session(ws: WebSocket, caller: Caller, address: string): void {
    const log = this.#o.logger.child({ node: caller.kind === 'node' ? caller.node.name : caller.name });
    let nodeId: string | undefined;
    const alive = ws as WebSocket & { alive?: boolean };
    alive.alive = true;
    ws.on('pong', () => (alive.alive = true));
    const firstFrame = setTimeout(() => ws.close(4002, 'no inventory'), firstFrameMs);

    const send = (m: ServerMessage) => ws.send(JSON.stringify(m));

    const start = async (inventory: NodeInventory): Promise<void> => {
      let record: NodeRecord;
      let credential: string | undefined;
      if (caller.kind === 'join') {
        credential = generateSecret('node');
        record = await this.#writes.join({
          id: caller.id,
          name: caller.name,
          joined_with: caller.token.name,
          address,
          agent_version: inventory.agent_version,
          inventory,
          secretHash: hashSecret(credential),
          tokenId: caller.token.id,
        });
        log.info({ address, token: caller.token.name }, 'node joined');
      } else {
        record = { ...caller.node, address, inventory };
        await this.#writes.reconnect({ id: record.id, inventory, address });
      }
      nodeId = record.id;
      const previous = this.#sessions.get(record.id);
      if (previous !== undefined && previous !== ws)
        previous.close(4000, 'replaced by a newer connection of the same node');
      this.#sessions.set(record.id, ws);
      this.#o.registry.connected(record);
      send({
        type: 'welcome',
        ...this.#tlsFor(record.name, inventory.address ?? address),
        node: { id: record.id, name: record.name },
        ...(credential === undefined ? {} : { credential }),
        heartbeat_ms: this.#o.heartbeatMs,
      });
      this.#listener?.connected(record.id);
    };

    let queue: Promise<void> = Promise.resolve();
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      // Frames are handled in order: the inventory must be stored before heartbeats apply to it.
      queue = queue
        .then(async () => {
          let raw: unknown;
          try {
            raw = JSON.parse(frameText(data));
          } catch {
            ws.close(4003, 'frames must be JSON');
            return;
          }
          const parsed = agentMessageSchema.safeParse(raw);
          if (!parsed.success) {
            log.warn(
              { issue: parsed.error.issues[0]?.message },
              'agent sent a frame this control plane does not understand',
            );
            return;
          }
          const m = parsed.data;
          if (nodeId === undefined) {
            if (m.type !== 'inventory') return;
            clearTimeout(firstFrame);
            try {
              await start(m.inventory);
            } catch (e) {
              const err = e instanceof LlmgwError ? e : new LlmgwError('internal', messageOf(e));
              log.warn({ reason: err.message }, 'agent refused');
              ws.close(4401, err.message.slice(0, 120));
            }
            return;
          }
          if (m.type === 'inventory') {
            await this.#o.registry.inventory(nodeId, m.inventory);
            this.#listener?.inventory?.(nodeId);
          } else if (m.type === 'heartbeat') this.#o.registry.heartbeat(nodeId, m.telemetry);
          else this.#listener?.message(nodeId, m);
        })
        .catch((e: unknown) => log.error({ err: messageOf(e) }, 'agent frame failed'));
    });

    ws.on('close', (code, reason) => {
      clearTimeout(firstFrame);
      if (nodeId === undefined) return;
      if (this.#sessions.get(nodeId) === ws) {
        this.#sessions.delete(nodeId);
        this.#o.registry.disconnected(
          nodeId,
          `its agent disconnected (${code}${reason.length > 0 ? `: ${reason.toString()}` : ''})`,
        );
        this.#listener?.disconnected(nodeId);
      }
      log.info({ code }, 'agent disconnected');
    });
    ws.on('error', (e) => log.warn({ err: e.message }, 'agent connection error'));
  }
}

/** A node's forwarder certificate for the address gateways dial, with the CA that signed it. */
export type NodeTls = (node: string, address: string) => { cert: string; key: string; ca: string };

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The refusal of an agent's upgrade, as a JSON error; the connection closes. */
function refuse(socket: Duplex, err: LlmgwError): void {
  const body = JSON.stringify({ error: { code: err.code, message: err.message } });
  socket.end(
    `HTTP/1.1 ${err.status} ${statusText(err.status)}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function statusText(status: number): string {
  return (
    {
      400: 'Bad Request',
      401: 'Unauthorized',
      403: 'Forbidden',
      409: 'Conflict',
      500: 'Internal Server Error',
    }[status] ?? 'Error'
  );
}
