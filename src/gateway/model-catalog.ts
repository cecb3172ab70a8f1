import { didYouMean } from '../core/did-you-mean.js';
import { engines } from '../engines/registry.js';
import type { ClientResponse } from '../http1/client-io.js';
import type { CatalogEntry, RouteTable } from '../protocol/routes.js';

import type { Exchange } from './exchange.js';
import type { GatewayPrincipal } from './keys.js';
import { GatewayError } from './openai-errors.js';

/** The catalog's models as the route table last gave them: what a request may name, and GET /v1/models. */
export class ModelCatalog {
  #table: RouteTable = { replicas: [], models: [] };
  #byName = new Map<string, CatalogEntry>();

  set(table: RouteTable): void {
    this.#table = table;
    this.#byName = new Map(table.models.map((m) => [m.name, m]));
  }

  get(name: string): CatalogEntry | undefined {
    return this.#byName.get(name);
  }

  names(): IterableIterator<string> {
    return this.#byName.keys();
  }

  /** The model a request names, if it exists, the key may use it, and it has the adapter; else throws GatewayError. */
  entry(base: string, adapter: string | undefined, principal: GatewayPrincipal): CatalogEntry {
    const entry = this.#byName.get(base);
    if (entry === undefined) throw this.#notFound(base, principal);
    if (principal.allowedModels !== null && !principal.allowedModels.includes(base)) {
      throw new GatewayError(
        'model_not_allowed',
        `key "${principal.name}" may not use model "${base}" (it may use: ${principal.allowedModels.join(', ')}); ask an admin (llmgw ctl key update)`,
        { param: 'model' },
      );
    }
    if (adapter !== undefined && !entry.adapters.includes(adapter)) {
      throw new GatewayError(
        'model_not_found',
        `model "${base}" has no adapter "${adapter}"${entry.adapters.length === 0 ? '' : ` (its adapters: ${entry.adapters.join(', ')})`}`,
        { param: 'model' },
      );
    }
    return entry;
  }

  #notFound(base: string, principal: GatewayPrincipal): GatewayError {
    const names = this.#table.models
      .map((m) => m.name)
      .filter((n) => principal.allowedModels === null || principal.allowedModels.includes(n));
    // Cheap even over thousands of models: the name is at most 63 characters, and most candidates are skipped by length.
    const near = didYouMean(base, names);
    const list = names.slice(0, 8).join(', ');
    return new GatewayError(
      'model_not_found',
      `model "${base}" does not exist${near === undefined ? '' : `; did you mean "${near}"?`}${list === '' ? '' : ` (models: ${list})`}`,
      { param: 'model' },
    );
  }

  /** GET /v1/models: the models the key may use, their adapters, and how many replicas are ready. */
  answerList(res: ClientResponse, x: Exchange): void {
    const allowed = x.principal?.allowedModels ?? null;
    const created = Math.floor(Date.now() / 1000);
    const data: Record<string, unknown>[] = [];
    for (const m of this.#table.models) {
      if (allowed !== null && !allowed.includes(m.name)) continue;
      const ready = this.#table.replicas.filter((r) => r.model === m.name).length;
      const atZero = m.wakeable === true && ready === 0 ? { scaled_to_zero: true } : {};
      data.push({
        id: m.name,
        object: 'model',
        created,
        owned_by: 'llmgw',
        ready_replicas: ready,
        ...atZero,
        ...(m.context_length === undefined ? {} : { context_length: m.context_length }),
      });
      for (const a of m.adapters)
        data.push({
          id: `${m.name}:${a}`,
          object: 'model',
          created,
          owned_by: 'llmgw',
          parent: m.name,
          ready_replicas: ready,
          ...atZero,
        });
    }
    const text = JSON.stringify({ object: 'list', data });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'x-request-id': x.requestId,
    });
    res.end(text);
  }
}

/** Whether one of a model's engines serves /v1/responses (the engine says; the gateway names none). */
export function servesResponses(entry: CatalogEntry): boolean {
  return engines.some((e) => e.servesResponses && entry.engines.includes(e.name));
}
