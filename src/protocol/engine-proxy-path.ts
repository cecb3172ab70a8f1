/**
 * A node's engine proxy takes requests for a replica's engine at `/r/<replica>/<path>`:
 * the agent's proxy reads it, the fleet writes it into endpoints.
 */
export const engineProxyPrefix = '/r/';
