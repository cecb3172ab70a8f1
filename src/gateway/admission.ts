import { clientText } from '../core/redact.js';
import type { CatalogEntry } from '../protocol/routes.js';

import { servesResponses } from './model-catalog.js';
import { GatewayError } from './openai-errors.js';

/**
 * The checks a request passes before any replica is chosen, each a pure function of what
 * it sent: its route, the model it names, and whether that model's engines serve the route.
 */

const chatPaths = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);
/** Model and adapter names are DNS labels: a longer name is refused before any work is done with it. */
const nameMax = 63;

/** GET (or HEAD, as HTTP asks: both HTTP layers send its head alone) /v1/models. */
export function isModelList(method: string | undefined, path: string): boolean {
  return (method === 'GET' || method === 'HEAD') && path === '/v1/models';
}

/** Throws 404 unless the request is a POST the gateway forwards. */
export function checkRoute(method: string | undefined, path: string): void {
  if (method === 'POST' && chatPaths.has(path)) return;
  throw new GatewayError(
    'not_found',
    `no route ${method ?? ''} ${clientText(path, 100)}: the gateway serves GET /v1/models and POST /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/responses`,
  );
}

/** The model a body names: `MODEL` or `MODEL:ADAPTER`. Throws 400 when none, or one too long to be a name. */
export function modelOf(body: Record<string, unknown>): {
  model: string;
  base: string;
  adapter: string | undefined;
} {
  const model = body['model'];
  if (typeof model !== 'string' || model === '')
    throw new GatewayError('invalid_request', 'model is required: name one of GET /v1/models', {
      param: 'model',
    });
  const colon = model.indexOf(':');
  const base = colon < 0 ? model : model.slice(0, colon);
  const adapter = colon < 0 ? undefined : model.slice(colon + 1);
  if (base.length > nameMax || (adapter?.length ?? 0) > nameMax) {
    // Anyone may send a megabyte here: it is neither repeated nor compared with anything.
    throw new GatewayError(
      'invalid_request',
      `the model name is ${model.length} characters long: models and adapters are named by DNS labels of at most ${nameMax} characters (MODEL, or MODEL:ADAPTER); GET /v1/models lists them`,
      { param: 'model' },
    );
  }
  return { model, base, adapter };
}

/** Throws 404 for /v1/responses on a model none of whose engines serve it. */
export function checkEngineRoute(path: string, base: string, entry: CatalogEntry): void {
  if (path !== '/v1/responses' || servesResponses(entry)) return;
  throw new GatewayError(
    'not_found',
    `model ${base} runs on ${entry.engines.join(', ')}, which does not serve /v1/responses: use /v1/chat/completions`,
  );
}
