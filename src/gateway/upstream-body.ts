import { engineFor } from '../engines/registry.js';
import type { GatewayRequest } from '../http1/client-io.js';
import type { RouteReplica } from '../protocol/routes.js';

/** The body as this replica's engine takes it: its name for the model, the adapter, usage asked for. */
export function upstreamBody(
  body: Record<string, unknown>,
  replica: RouteReplica,
  adapter: string | undefined,
  addUsage: boolean,
): string {
  const out: Record<string, unknown> = { ...body, model: replica.servedName };
  if (adapter !== undefined) engineFor(replica.engine).selectAdapter(out, adapter, replica.adapters);
  if (addUsage)
    out['stream_options'] = {
      ...(body['stream_options'] as Record<string, unknown> | undefined),
      include_usage: true,
    };
  return JSON.stringify(out);
}

/**
 * Which conversation a request belongs to: the client's `x-session-id`, else a hash of
 * what starts it (system prompt and first message, or the prompt's start), so a
 * conversation's next turn finds the replica whose prefix cache holds it.
 */
export function affinityKey(
  headers: GatewayRequest['headers'],
  body: Record<string, unknown>,
): string | undefined {
  const session = headers['x-session-id'];
  if (typeof session === 'string' && session !== '') return `s:${session}`;
  const messages = body['messages'];
  if (Array.isArray(messages) && messages.length > 0)
    return `m:${fnv1a(JSON.stringify(messages.slice(0, 2)))}`;
  const prompt = body['prompt'];
  if (typeof prompt === 'string' && prompt.length > 0) return `p:${fnv1a(prompt.slice(0, 1024))}`;
  return undefined;
}

function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}
