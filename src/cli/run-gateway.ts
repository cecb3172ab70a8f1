import { ApiClient } from '../client/api-client.js';
import { FailoverClient } from '../client/failover-client.js';
import type { WhoAmI } from '../core/api-types.js';
import { HttpServer } from '../http1/http-server.js';

import { remoteRoutes, remoteSignals, remoteUsage } from '../gateway/control-plane-api.js';
import { remoteKeys } from '../gateway/keys.js';
import { mountGateway } from '../gateway/mount.js';
import { sharedRoutes } from '../gateway/shared-routes.js';
import { primaryServices } from '../gateway/workers/primary-services.js';
import { newGateway, newWorkerPool } from './gateway-compose.js';
import { createLogger } from './logger.js';
import { untilSignalled } from './signals.js';
import { commandSettings } from './settings.js';
import { UsageError } from './usage-error.js';
import { readCaFile, trustedCa } from './ctl/connection.js';
import { readLogin } from './ctl/login-file.js';
import { fetchTrusting } from '../tls/trust.js';

export interface RunGatewayOptions {
  /** The control planes of the cluster; asked in turn when one is away. */
  servers: string[];
  key: string;
  listen: string;
  config: string | undefined;
  /** The CA file for an https control plane. */
  ca?: string | undefined;
}

/** On https: the CA given (--ca, LLMGW_CA), else the one `llmgw ctl login` pinned for this server; else the system's. */
function controlPlaneTrust(o: RunGatewayOptions, url: string): { fetch?: typeof fetch } {
  const server = url.replace(/\/+$/, '');
  const saved = readLogin();
  const ca =
    o.ca === undefined
      ? trustedCa(server, process.env, saved?.server.replace(/\/+$/, '') === server ? saved.ca : undefined)
      : readCaFile(o.ca, '--ca');
  return ca === undefined || !server.startsWith('https:')
    ? {}
    : { fetch: fetchTrusting(ca, { repin: `llmgw gateway --ca ${tlsCaHint}` }) };
}

const tlsCaHint = 'FILE (the cluster CA: DATA_DIR/tls/ca.pem on a control plane)';

/** A gateway of its own: routes, key checks and usage through the control plane's API. */
export async function runGateway(o: RunGatewayOptions): Promise<void> {
  const logger = createLogger('gateway', process.env, { async: true });
  const loaded = commandSettings({ path: o.config, env: process.env });
  const clients = o.servers.map(
    (server) => new ApiClient({ server, key: o.key, timeoutMs: 5000, ...controlPlaneTrust(o, server) }),
  );
  const client = new FailoverClient(clients);
  const me = (await client.request<WhoAmI>('GET', '/whoami')).body;
  if (me.role !== 'gateway' && me.role !== 'admin') {
    throw new UsageError(
      `key "${me.name}" has the ${me.role} role; a gateway needs one of role gateway (llmgw ctl key create NAME --role gateway)`,
    );
  }
  // Worker processes (gateway.workers) take the address; this one answers their keys, limits
  // and /v1 on connections they relay (another path: 404, as here).
  const pool = newWorkerPool(loaded.settings, logger);
  const keys = remoteKeys(client);
  const routes = sharedRoutes(remoteRoutes(client));
  const usage = remoteUsage(client);
  const signals = remoteSignals(client);
  const gateway = newGateway({
    keys,
    routes,
    usage,
    signals,
    logger,
    settings: loaded.settings,
    limits: pool?.limits,
  });
  await gateway.start();
  const http = new HttpServer({
    maxConnectionsPerClient: loaded.settings.gateway.max_connections_per_client,
    ...(pool === undefined ? {} : { shared: pool }),
  });
  mountGateway(http, gateway);
  const url = await http.listen(o.listen);
  pool?.attach(primaryServices(gateway, { keys, routes, usage, signals }));
  logger.info(
    { url, servers: o.servers, ...(pool === undefined ? {} : { workers: pool.pids() }) },
    'gateway listening',
  );
  await untilSignalled(logger);
  await http.close();
  await gateway.stop();
}
