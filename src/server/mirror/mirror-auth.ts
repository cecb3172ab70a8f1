import type { IncomingMessage } from 'node:http';

import type { Authenticator } from '../../auth/authenticator.js';
import { bearerToken } from '../../core/bearer.js';
import { LlmgwError } from '../../core/errors.js';
import { hashSecret } from '../../core/secrets.js';
import { nodeIdHeader } from '../../protocol/agent-protocol.js';
import type { Store } from '../../store/store.js';

/** Says who asks (for the log), or refuses with the API's 401 or 403. */
export type MirrorAuthorizer = (req: IncomingMessage) => Promise<string>;

/**
 * The mirror serves the cluster's nodes, as their agents authenticate on the agent channel (the
 * node's credential, with its id in x-llmgw-node-id), and admin keys (to check it by hand).
 */
export function mirrorAuthorizer(deps: { store: Store; auth: Authenticator }): MirrorAuthorizer {
  return async (req) => {
    const header = req.headers.authorization;
    const secret = bearerToken(header);
    if (secret === undefined) {
      throw new LlmgwError(
        'unauthenticated',
        `the mirror serves the cluster's nodes and admins: send "Authorization: Bearer SECRET" with a node's credential (and its id in ${nodeIdHeader}, as agents do) or an admin key`,
      );
    }
    if (secret.startsWith('llmgw_node_')) {
      const id = req.headers[nodeIdHeader];
      if (typeof id !== 'string' || id === '') {
        throw new LlmgwError(
          'unauthenticated',
          `a node's credential comes with the node's id in the ${nodeIdHeader} header (agents send it): add it`,
        );
      }
      const credential = await deps.store.nodes.findCredential(id);
      if (credential?.secretHash !== hashSecret(secret)) {
        throw new LlmgwError(
          'unauthenticated',
          "this node's credential is not valid here (was the node removed, or the database replaced?): join it again with a token (llmgw ctl node token)",
        );
      }
      return `node ${id}`;
    }
    const principal = await deps.auth.authenticate(header);
    if (principal.role !== 'admin') {
      throw new LlmgwError(
        'permission_denied',
        `the mirror serves the cluster's nodes and admin keys; key "${principal.name}" has the ${principal.role} role`,
      );
    }
    return `key ${principal.name}`;
  };
}
