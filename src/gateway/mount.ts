import { nodeRequest } from '../http1/client-io.js';
import type { HttpServer } from '../http1/http-server.js';

import type { Gateway } from './gateway.js';

/** Where the gateway is served: a control plane's address, or a gateway's own. */
export type GatewayHost = Pick<HttpServer, 'fastLane' | 'mount'>;

/** /v1 on the front door's fast path (node:http for what it leaves), and /metrics: requests go from http1 to the gateway. */
export function mountGateway(host: GatewayHost, gateway: Gateway): void {
  host.fastLane('/v1/', {
    maxBodyBytes: gateway.maxBodyBytes,
    handler: (req, res) => gateway.handle(req, res),
    fallback: (req, res) => gateway.handle(nodeRequest(req), res),
  });
  host.mount('/metrics', (req, res) => void gateway.metricsHandler(nodeRequest(req), res));
}
