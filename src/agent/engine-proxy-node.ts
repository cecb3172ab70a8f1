import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { Logger } from 'pino';
import { z } from 'zod';

import { writeFileAtomic } from '../config/write.js';
import { LlmgwError, messageOf } from '../core/errors.js';
import type { NodeInventory } from '../gpu/types.js';
import { assignedShardSchema, type ServerMessage } from '../protocol/agent-protocol.js';

import { EngineProxy, engineRoutesOf } from './engine-proxy.js';

export interface NodeEngineProxyOptions {
  /** The control plane's URL: on this machine's loopback, nothing leaves it and no proxy is run. */
  server: string;
  /** agent.address: where it listens (unset: every address). */
  address: string | undefined;
  /** agent.proxy_port (0: one the OS gives). */
  port: number;
  dataDir: string;
  logger: Logger;
  /** The executor's saved assignment: the replicas to forward to before the control plane is reached. */
  assignmentFile: string;
}

const materialSchema = z.object({ cert: z.string(), key: z.string(), ca: z.string() });

/**
 * The engine proxy as a node's agent runs it: its certificate from each welcome (kept in
 * the data dir, so a restarted agent serves its engines again before it reaches the
 * control plane), its replicas from each assignment, and what it changes about the node:
 * engines started while it serves listen on loopback, and the inventory names its port.
 */
export class NodeEngineProxy {
  readonly proxy: EngineProxy;
  readonly #file: string;
  readonly #logger: Logger;

  private constructor(proxy: EngineProxy, o: NodeEngineProxyOptions) {
    this.proxy = proxy;
    this.#file = join(o.dataDir, 'agent', 'engine-proxy.json');
    this.#logger = o.logger;
  }

  /** Listens, and serves at once with a certificate a previous agent was given; undefined when the control plane is on loopback. */
  static async start(o: NodeEngineProxyOptions): Promise<NodeEngineProxy | undefined> {
    if (isLoopback(new URL(o.server).hostname)) return undefined;
    let proxy: EngineProxy;
    try {
      proxy = await EngineProxy.start({ host: o.address, port: o.port, logger: o.logger });
    } catch (e) {
      throw new LlmgwError(
        'unavailable',
        `the engine proxy could not listen on ${o.address ?? 'every address'} port ${o.port}: ${messageOf(e)}; ` +
          'set agent.proxy_port to a free port, or 0 for one the OS gives',
        { cause: e },
      );
    }
    const n = new NodeEngineProxy(proxy, o);
    n.#load(o.assignmentFile);
    return n;
  }

  /** Where an engine starting now listens: loopback while the proxy serves, else `otherwise`. */
  bindHost(otherwise: string): string {
    return this.proxy.serving ? '127.0.0.1' : otherwise;
  }

  /** The inventory with the proxy's port, once it serves. */
  inventory(inventory: NodeInventory): NodeInventory {
    return this.proxy.serving ? { ...inventory, engine_proxy: { port: this.proxy.port } } : inventory;
  }

  /** A welcome: a certificate (new, or renewed) to serve with. */
  welcome(m: Extract<ServerMessage, { type: 'welcome' }>): void {
    if (m.tls === undefined) return;
    this.proxy.setMaterial(m.tls);
    try {
      writeFileAtomic(this.#file, JSON.stringify(m.tls));
    } catch (e) {
      this.#logger.warn(
        { err: messageOf(e), file: this.#file },
        'could not keep the engine proxy certificate',
      );
    }
  }

  /** Any message after the welcome: an assignment names the replicas to forward to. */
  message(m: Exclude<ServerMessage, { type: 'welcome' }>): void {
    if (m.type === 'assign') this.proxy.setRoutes(engineRoutesOf(m.shards));
  }

  close(): Promise<void> {
    return this.proxy.close();
  }

  #load(assignmentFile: string): void {
    try {
      if (existsSync(this.#file))
        this.proxy.setMaterial(materialSchema.parse(JSON.parse(readFileSync(this.#file, 'utf8'))));
      if (existsSync(assignmentFile)) {
        const saved = z
          .object({ shards: z.array(assignedShardSchema) })
          .parse(JSON.parse(readFileSync(assignmentFile, 'utf8')));
        this.proxy.setRoutes(engineRoutesOf(saved.shards));
      }
    } catch (e) {
      this.#logger.warn(
        { err: messageOf(e) },
        'engine proxy: the saved certificate or assignment is unreadable; waiting for the control plane',
      );
    }
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '[::1]' || host === '::1';
}
