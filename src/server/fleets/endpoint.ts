import { engineProxyPrefix } from '../../protocol/engine-proxy-path.js';
import type { NodeView } from '../../protocol/node-views.js';

/** Hosts a gateway on the control plane's machine reaches without leaving it. */
const loopbackHost = /^(127\.|\[::1\]$|localhost$)/;

/**
 * Where a gateway sends a replica's requests: through its node's engine proxy over TLS
 * (`https://node:proxy/r/<replica>`) when the node runs one, as its engines then listen
 * on the node's loopback only; straight to the engine (`http://node:port`) otherwise, and
 * always for a node on the control plane's own loopback (nothing crosses a network).
 * `host` is the node's address as a client dials it (`hostOf`).
 */
export function replicaEndpoint(o: {
  replica: string;
  host: string;
  port: number;
  node: Pick<NodeView, 'engine_proxy'>;
}): string {
  const proxy = o.node.engine_proxy;
  if (proxy === undefined || loopbackHost.test(o.host)) return `http://${o.host}:${o.port}`;
  return `https://${o.host}:${proxy.port}${engineProxyPrefix}${o.replica}`;
}
