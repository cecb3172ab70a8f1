import { randomUUID } from 'node:crypto';

import { didYouMeanSuffix } from '../../../core/did-you-mean.js';
import { LlmgwError } from '../../../core/errors.js';
import { clientText } from '../../../core/redact.js';
import type { Origin } from '../../../models/origin.js';
import type { AgentMessage, DownloadReport } from '../../../protocol/agent-protocol.js';
import type { ModelDownloads, NodeCache, NodeDownload, PullStarted } from '../../../protocol/cache-views.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { EventPublisher } from '../../events/event-hub.js';
import { publishDownloads } from '../../events/fleet-changes.js';
import type { AgentHub } from '../../nodes/agent-hub.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import { modelDownloads } from '../fleet.js';

import type { Placed } from './placed.js';

/** A cache_list sent to a node, waiting for its answer. */
interface CacheRequest {
  nodeId: string;
  node: string;
  done: (answer: NodeCache) => void;
}

export interface NodeFilesOptions {
  registry: NodeRegistry;
  hub: AgentHub;
  placed: Placed;
  events?: EventPublisher | undefined;
  /** Waits until placement asked for has run (a purge is sent after the model's replicas are gone). */
  settled: () => Promise<void>;
}

/** The model files on the nodes: pulls ahead of placement, downloads as reported, caches, purges. */
export class NodeFiles {
  readonly #o: NodeFilesOptions;
  readonly #cacheRequests = new Map<string, CacheRequest>();
  /** Each node's downloads, as its agent last reported them (kept while it is away). */
  readonly #downloads = new Map<string, DownloadReport[]>();

  constructor(o: NodeFilesOptions) {
    this.#o = o;
  }

  /** A node's agent reported its downloads. */
  reported(nodeId: string, downloads: DownloadReport[]): void {
    this.#downloads.set(nodeId, downloads);
    if (this.#o.events !== undefined) publishDownloads(this.#o.events, downloads, this.#o.placed.view());
  }

  /** A node's agent answered a cache_list of this control plane's. */
  answer(nodeId: string, m: Extract<AgentMessage, { type: 'cache' }>): void {
    const req = this.#cacheRequests.get(m.request);
    if (req?.nodeId !== nodeId) return;
    this.#cacheRequests.delete(m.request);
    req.done({
      node: req.node,
      root: m.root,
      ...(m.max_bytes === undefined ? {} : { max_bytes: m.max_bytes }),
      ...(m.free_bytes === undefined ? {} : { free_bytes: m.free_bytes }),
      entries: m.entries,
      ...(m.error === undefined ? {} : { error: m.error }),
    });
  }

  /** The node's agent left: a cache it was asked for is answered with why. */
  nodeGone(nodeId: string): void {
    for (const [id, r] of this.#cacheRequests) {
      if (r.nodeId === nodeId) {
        this.#cacheRequests.delete(id);
        r.done({ node: r.node, entries: [], error: `node ${r.node} disconnected before it answered` });
      }
    }
  }

  /**
   * Asks nodes to fetch a model's files now, ahead of placement (`ctl model pull`): the named
   * ones, else every ready node. Each reports its progress in `downloads` messages.
   */
  pull(model: string, origin: Origin, nodes: readonly string[] = []): PullStarted {
    if (origin.kind === 'path')
      throw new LlmgwError(
        'invalid_argument',
        `model ${model} is read from ${origin.source} on each node, which llmgw does not fetch: put the files at that path on every node`,
      );
    const targets = this.#nodesNamed(nodes, `fetch model ${model}`);
    const total = origin.files.reduce((n, f) => n + f.size, 0);
    for (const v of targets) {
      if (!this.#o.hub.send(v.id, { type: 'pull', model, origin })) continue;
      // Until the node says otherwise: queued, not what it said of an earlier download of these files.
      const others = (this.#downloads.get(v.id) ?? []).filter(
        (d) => !(d.source === origin.source && d.commit === origin.commit),
      );
      this.#downloads.set(v.id, [
        ...others,
        {
          model,
          source: origin.source,
          ...(origin.commit === undefined ? {} : { commit: origin.commit }),
          state: 'queued',
          done: 0,
          total,
          rate_bps: 0,
        },
      ]);
    }
    return {
      model,
      source: origin.source,
      ...(origin.commit === undefined ? {} : { commit: origin.commit }),
      nodes: targets.map((v) => v.name),
    };
  }

  /** Each node's download of a model's files, as last reported (the origin's, whichever model asked). */
  downloads(model: string, origin: Origin): ModelDownloads {
    const names = new Map(this.#o.registry.views().map((v) => [v.id, v.name]));
    const nodes: ModelDownloads['nodes'] = [];
    for (const [nodeId, reports] of this.#downloads) {
      const node = names.get(nodeId);
      if (node === undefined) continue;
      const mine = reports.filter(
        (d) => d.source === origin.source && (origin.commit === undefined || d.commit === origin.commit),
      );
      // One origin may be fetched for several models: the report of this model, else any of them.
      const report = mine.find((d) => d.model === model) ?? mine[0];
      if (report !== undefined) nodes.push({ ...report, model, node });
    }
    nodes.sort((a, b) => a.node.localeCompare(b.node));
    return modelDownloads(model, origin, nodes);
  }

  /** Every download running on a node now (queued, fetching or verifying), as last reported. */
  activeDownloads(): NodeDownload[] {
    const registry = this.#o.registry;
    const names = new Map(registry.views().map((v) => [v.id, v.name]));
    const out: NodeDownload[] = [];
    for (const [nodeId, reports] of this.#downloads) {
      const node = names.get(nodeId);
      if (node === undefined || !registry.isConnected(nodeId)) continue;
      for (const d of reports) if (d.state !== 'done' && d.state !== 'failed') out.push({ ...d, node });
    }
    return out.sort((a, b) => a.node.localeCompare(b.node) || a.model.localeCompare(b.model));
  }

  /** What each node's cache holds (the named one, else every connected node), asked of its agent. */
  async caches(node?: string, timeoutMs = 10_000): Promise<NodeCache[]> {
    const registry = this.#o.registry;
    const targets =
      node === undefined
        ? registry.views().filter((v) => registry.isConnected(v.id))
        : this.#nodesNamed([node], 'list its cache');
    return Promise.all(targets.map((v) => this.#cacheOf(v, timeoutMs)));
  }

  #cacheOf(v: NodeView, timeoutMs: number): Promise<NodeCache> {
    return new Promise<NodeCache>((resolve) => {
      const request = randomUUID();
      const timer = setTimeout(() => {
        this.#cacheRequests.delete(request);
        resolve({
          node: v.name,
          entries: [],
          error: `node ${v.name} did not answer within ${Math.round(timeoutMs / 1000)} s: its agent may be busy or an older version; llmgw ctl nodes shows it`,
        });
      }, timeoutMs);
      this.#cacheRequests.set(request, {
        nodeId: v.id,
        node: v.name,
        done: (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
      });
      if (!this.#o.hub.send(v.id, { type: 'cache_list', request })) {
        this.#cacheRequests.delete(request);
        clearTimeout(timer);
        resolve({ node: v.name, entries: [], error: `node ${v.name} is not connected` });
      }
    });
  }

  /**
   * Asks every connected node to remove these files of a model (`ctl model rm --purge`). Sent
   * after the model's replicas were taken off the assignments, so that only files another
   * model's engine uses are kept.
   */
  async purge(model: string, origin: Origin): Promise<string[]> {
    await this.#o.settled();
    const sent: string[] = [];
    for (const v of this.#o.registry.views()) {
      if (this.#o.hub.send(v.id, { type: 'purge', model, origins: [origin] })) sent.push(v.name);
    }
    return sent.sort();
  }

  /** Nodes by name, each known and connected; none named: every ready, connected node. */
  #nodesNamed(names: readonly string[], what: string): NodeView[] {
    const registry = this.#o.registry;
    const views = registry.views();
    if (names.length === 0) {
      const ready = views.filter((v) => v.state === 'ready' && registry.isConnected(v.id));
      if (ready.length === 0)
        throw new LlmgwError(
          'conflict',
          `no node is ready to ${what}: start an agent (llmgw ctl nodes lists the nodes and why each is not ready)`,
        );
      return ready;
    }
    return [...new Set(names)].map((name) => {
      const v = views.find((x) => x.name === name);
      if (v === undefined)
        throw new LlmgwError(
          'not_found',
          `no node is named "${clientText(name)}"${didYouMeanSuffix(
            name,
            views.map((x) => x.name),
          )} (llmgw ctl nodes lists them)`,
        );
      if (!registry.isConnected(v.id))
        throw new LlmgwError(
          'conflict',
          `node ${name} is not connected to this control plane, so it cannot ${what} now: start its agent, or leave it out`,
        );
      return v;
    });
  }
}
