import { getRequestListener } from '@hono/node-server';
import type { Logger } from 'pino';

import { Authenticator } from '../auth/authenticator.js';
import type { LoadedSettings, LoadOptions } from '../config/load.js';
import type { HubSettings } from '../config/schema.js';
import { diffSettings } from '../config/write.js';
import type { Origin } from '../models/origin.js';
import type { Store } from '../store/store.js';

import { ensureAdminKey } from './state/admin-key.js';
import { createApi } from './api/app.js';
import { apiPrefix } from '../protocol/api-paths.js';
import { Catalog } from './state/catalog.js';
import { ModelOrigins } from './state/model-origins.js';
import { ownData } from './state/own-data.js';
import { consoleRoute } from './console-route.js';
import { HttpServer, notFound, type RequestHandler, type SharedListener } from '../http1/http-server.js';
import { agentChannelPath } from '../protocol/agent-protocol.js';
import { messageOf } from '../core/errors.js';
import { loadEngineKeys, prepareEngineKeys } from './fleets/engine-keys.js';
import { AgentFleet } from './fleets/agent/agent-fleet.js';
import type { Fleet } from './fleets/fleet.js';
import { connectCluster } from '../kube/client.js';
import { KubeFleet, kubernetesTakesNoAgents } from './fleets/kube/kube-fleet.js';
import { Autoscaler } from './autoscale/autoscaler.js';
import { BlobIndex } from './mirror/blob-index.js';
import { Mirror, type MirrorOptions } from './mirror/mirror.js';
import { mirrorAuthorizer } from './mirror/mirror-auth.js';
import { mirrorPrefix, mirrorRoute } from './mirror/mirror-route.js';
import { AgentHub } from './nodes/agent-hub.js';
import { NodeRegistry } from './nodes/node-registry.js';
import { SettingsHolder } from './state/settings-holder.js';
import { EventHub } from './events/event-hub.js';
import { controlPlaneId } from './cluster/control-plane-id.js';
import { Leadership } from './cluster/leadership.js';
import { controlPlaneViews } from './cluster/control-plane-views.js';
import { TrafficSampler } from './traffic/traffic-sampler.js';
import { isLoopbackHost, ServingCertificates, tlsWanted } from '../tls/serving.js';
import { parseListen } from '../http1/listen.js';
import { fingerprint, publicKeyHash } from '../tls/certificates.js';
import { clusterCa, tlsDir } from '../tls/cluster-ca.js';
import { nodeCertificates } from './nodes/node-certificates.js';
import { join } from 'node:path';

export interface ControlPlaneOptions {
  settings: LoadedSettings;
  /** How the settings were loaded, to validate replacements the same way. */
  loadOptions: LoadOptions;
  /** The store, opened by the composition root. Closed by stop(). */
  store: Store;
  logger: Logger;
  version: string;
  /** LLMGW_ADMIN_KEY. */
  adminKey?: string | undefined;
  /** LLMGW_ENGINE_KEY_SECRET; unset, the secret in the data dir (made on the first start). */
  engineKeySecret?: string | undefined;
  /** Where engineKeySecret came from, for messages; LLMGW_ENGINE_KEY_SECRET unless given. */
  engineKeySecretSource?: string;
  /** Overrides the settings' listen address (tests use 127.0.0.1:0). */
  listen?: string;
  /** How often agents send heartbeats; a node that misses three is not ready. */
  heartbeatMs?: number;
  /** Which file a mirror blob key is; the catalog's origins unless given (tests). */
  mirrorLookup?: MirrorOptions['lookup'];
  /** What model sources are resolved with (tests count or fail requests); the global fetch unless given. */
  fetch?: typeof fetch;
  /** Each model's pinned origin, for pull, purge and the mirror's list; the catalog's unless given (tests). */
  originOf?: (model: string) => Promise<Origin | undefined>;
  /** The built web console served at /; default the package's dist/console. */
  consoleDir?: string;
  /** GET /events: heartbeat and least gap between events of a topic (tests shorten them). */
  events?: { heartbeatMs?: number; minGapMs?: number };
  /** How often the gateway's traffic is sampled (GET /traffic); 10 s unless given (tests). */
  trafficStepMs?: number;
  /** The serving certificate's lifetime when made by the cluster CA (tests shorten it to see renewal). */
  servingLifetimeMs?: number;
  /** The listen address served by gateway worker processes, which relay the rest here (gateway.workers). */
  shared?: SharedListener;
}

/** The control plane: catalog, API and (mounted by later parts) gateway and agent channel. */
export class ControlPlane {
  readonly url: string;
  /** The admin key made on this first start, to be shown once; undefined otherwise. */
  readonly generatedAdminKey: string | undefined;
  readonly settings: SettingsHolder;
  readonly catalog: Catalog;
  /** Models' sources resolved: `idle()` waits for the declared models' resolution under way. */
  readonly origins: ModelOrigins;
  readonly store: Store;
  readonly #http: HttpServer;
  readonly #logger: Logger;

  readonly registry: NodeRegistry;
  readonly fleet: Fleet;
  readonly authenticator: Authenticator;
  /** The cluster's mirror of model files (list and purge for ctl cache and model rm --purge). */
  readonly mirror: Mirror;
  readonly #hub: AgentHub;
  /** What changed, told to the clients of GET /events (this control plane's only). */
  readonly events: EventHub;
  /** The gateway's traffic over the last hour (GET /traffic): attach the gateway run in this process. */
  readonly traffic: TrafficSampler;
  /** Which control plane places replicas (this one, alone on SQLite; one of several on PostgreSQL). */
  readonly leadership: Leadership;
  /** Autoscaled models' counts; the gateways' load reports and wake-ups go to it (ScaleSignals). */
  readonly autoscaler: Autoscaler;
  readonly #beforeStoreClose: (() => Promise<void>)[] = [];
  /** The serving certificate and the cluster CA when it serves HTTPS; undefined on plain HTTP. */
  readonly tls: ServingCertificates | undefined;

  private constructor(init: {
    url: string;
    generatedAdminKey: string | undefined;
    settings: SettingsHolder;
    catalog: Catalog;
    origins: ModelOrigins;
    store: Store;
    http: HttpServer;
    logger: Logger;
    registry: NodeRegistry;
    hub: AgentHub;
    fleet: Fleet;
    auth: Authenticator;
    mirror: Mirror;
    events: EventHub;
    traffic: TrafficSampler;
    leadership: Leadership;
    tls: ServingCertificates | undefined;
    autoscaler: Autoscaler;
  }) {
    this.autoscaler = init.autoscaler;
    this.leadership = init.leadership;
    this.tls = init.tls;
    this.events = init.events;
    this.traffic = init.traffic;
    this.mirror = init.mirror;
    this.registry = init.registry;
    this.fleet = init.fleet;
    this.authenticator = init.auth;
    this.#hub = init.hub;
    this.url = init.url;
    this.generatedAdminKey = init.generatedAdminKey;
    this.settings = init.settings;
    this.catalog = init.catalog;
    this.origins = init.origins;
    this.store = init.store;
    this.#http = init.http;
    this.#logger = init.logger;
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const { store, logger } = options;
    const { generated } = await ensureAdminKey(store, options.adminKey);
    const keys = loadEngineKeys({
      dataDir: options.settings.settings.data_dir,
      fromEnv: options.engineKeySecret,
      ...(options.engineKeySecretSource === undefined ? {} : { source: options.engineKeySecretSource }),
    });
    await prepareEngineKeys(store, keys);
    // Kubernetes mode: the cluster is reached (and its informers synced) before anything else starts.
    const kube = options.settings.settings.kubernetes;
    const cluster = kube === undefined ? undefined : await connectCluster(kube, { log: logger });
    const origins: ModelOrigins = new ModelOrigins({
      store,
      hub: (): HubSettings => settings.current.settings.hub,
      own: () => ownData(settings.current),
      env: options.loadOptions.env ?? process.env,
      logger,
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    });
    const settings: SettingsHolder = new SettingsHolder({
      initial: options.settings,
      store,
      loadOptions: options.loadOptions,
      vet: (next, before): Promise<void> => origins.vet(next, before),
    });
    const catalog = new Catalog({
      store,
      origins,
      declared: () => settings.current.settings.models,
      settingsPath: () => settings.current.source.path,
    });
    const auth = new Authenticator({ store });
    const heartbeatMs = options.heartbeatMs ?? options.settings.settings.agent.heartbeat_ms;
    const registry = new NodeRegistry({ store, logger, heartbeatMs });
    await registry.start();
    const hub = new AgentHub({
      store,
      registry,
      logger,
      heartbeatMs,
      ...(kube === undefined ? {} : { refuseAgents: kubernetesTakesNoAgents }),
    });
    const id = controlPlaneId(options.settings.settings.data_dir);
    let url = '';
    const leadership = new Leadership({
      store,
      id,
      url: () => url,
      version: options.version,
      leaseMs: options.settings.settings.ha.lease_s * 1000,
      logger: logger.child({ part: 'leadership' }),
    });
    await leadership.start();
    // Control planes on one PostgreSQL database wake each other: a node joined or left through
    // another, the catalog changed through another's API.
    const shared = store.dialect === 'postgres';
    if (shared) {
      // Heard until the store closes.
      // A burst (a reconnect storm on another control plane) is one read of the nodes, not one each.
      let refresh: NodeJS.Timeout | undefined;
      store.cluster.listen('nodes', (from) => {
        if (from === id || refresh !== undefined) return;
        refresh = setTimeout(() => {
          refresh = undefined;
          void registry.refresh().catch(() => undefined);
        }, 250);
        refresh.unref();
      });
      // Of the nodes whose agents talk to this one; the others' are told by theirs.
      registry.onStateChange((name) => {
        const node = registry.view(name);
        if (node !== undefined && registry.isConnected(node.id))
          void store.cluster.notify('nodes', id).catch(() => undefined);
      });
    }
    const events = new EventHub({
      ...(options.events?.minGapMs === undefined ? {} : { minGapMs: options.events.minGapMs }),
    });
    registry.onStateChange((name) => events.publish('nodes', { nodes: [name] }));
    registry.onReport((name) => events.publish('nodes', { nodes: [name] }));
    catalog.onChange(() => events.publish('models'));
    origins.onResolved(() => events.publish('models'));
    settings.onChange(() => events.publish('config'));
    const traffic = new TrafficSampler({
      ...(options.trafficStepMs === undefined ? {} : { stepMs: options.trafficStepMs }),
      onSample: () => events.publish('traffic'),
    });
    // The one place that picks the fleet: Kubernetes objects when the settings say so, else agents.
    let engineCa: string | undefined;
    let fleet: Fleet;
    if (cluster !== undefined && kube !== undefined) {
      const kubeFleet = new KubeFleet({
        cluster,
        catalog,
        store,
        keys,
        logger: logger.child({ part: 'kubernetes' }),
        settings: () => ({
          // Read at start: a changed namespace or connection takes effect at the next start.
          pods: kube,
          llamaParallel: settings.current.settings.agent.engines.llamacpp.parallel,
          hub: settings.current.settings.hub,
        }),
        leader: leadership,
        scaledReplicas: (spec) => autoscaler.countOf(spec),
        events,
      });
      registry.setExternal(() => kubeFleet.nodeViews());
      fleet = kubeFleet;
    } else {
      fleet = new AgentFleet({
        store,
        catalog,
        registry,
        hub,
        settings,
        logger,
        keys,
        hubAccess: () => origins.access(),
        events,
        leader: leadership,
        controlPlaneId: id,
        scaledReplicas: (spec) => autoscaler.countOf(spec),
        engineCa: () => engineCa,
      });
    }
    const autoscaler: Autoscaler = new Autoscaler({
      store,
      specs: () => catalog.specs(),
      fleet,
      settings: () => settings.current.settings.autoscale,
      logger: logger.child({ part: 'autoscaler' }),
      controlPlaneId: id,
      shared,
      onChange: () => events.publish('models'),
    });
    await autoscaler.start();
    catalog.onChange(() => fleet.poke());
    origins.onResolved(() => fleet.poke());
    settings.onChange(() => fleet.poke());
    if (shared) {
      const tellOthers = () => void store.cluster.notify('models', id).catch(() => undefined);
      catalog.onChange(tellOthers);
      origins.onResolved(tellOthers);
    }
    await fleet.start();
    // Declared models cannot be refused at start: resolved in the background, failures recorded.
    void origins.syncDeclared(options.settings.settings.models, { retry: true });
    const blobs = new BlobIndex();
    const mirror = new Mirror({
      dir: options.settings.settings.mirror.dir,
      enabled: () => settings.current.settings.mirror.enabled,
      hub: () => origins.access(),
      lookup: options.mirrorLookup ?? ((key) => blobs.lookup(key)),
      logger: logger.child({ part: 'mirror' }),
    });
    // The mirror serves the files of the catalog's models: its index follows every change.
    const indexBlobs = async () => {
      try {
        blobs.set((await catalog.origins()).values());
      } catch (e) {
        logger.warn({ err: messageOf(e) }, "could not read the models' origins for the mirror");
      }
    };
    await indexBlobs();
    catalog.onChange(() => void indexBlobs());
    origins.onResolved(() => void indexBlobs());
    const api = createApi({
      store,
      catalog,
      settings,
      auth,
      logger,
      version: options.version,
      registry,
      hub,
      fleet,
      autoscaler,
      originOf: options.originOf ?? (async (name) => (await catalog.origins()).get(name)),
      resolveSource: (source) => origins.resolve(source),
      mirror,
      events,
      traffic,
      controlPlanes: () =>
        controlPlaneViews(store, { self: id, leaseMs: options.settings.settings.ha.lease_s * 1000 }),
      eventsOptions: {
        ...(options.events?.heartbeatMs === undefined ? {} : { heartbeatMs: options.events.heartbeatMs }),
      },
    });

    const listen = options.listen ?? options.settings.settings.listen;
    const tlsSettings = options.settings.settings.tls;
    const host = parseListen(listen).host;
    const tls = tlsWanted(host, tlsSettings)
      ? await ServingCertificates.start({
          shared: store.shared,
          seal: keys,
          dataDir: options.settings.settings.data_dir,
          host,
          tls: tlsSettings,
          logger: logger.child({ part: 'tls' }),
          ...(options.servingLifetimeMs === undefined ? {} : { lifetimeMs: options.servingLifetimeMs }),
        })
      : undefined;
    if (tls === undefined && !isLoopbackHost(host))
      logger.warn(
        { listen },
        'TLS IS OFF (tls.enabled: false) on an address beyond this machine: API keys, join tokens and prompts cross the network in clear unless a proxy in front terminates TLS',
      );
    const http = new HttpServer({
      maxConnectionsPerClient: options.settings.settings.gateway.max_connections_per_client,
      ...(tls === undefined ? {} : { tls: tls.current }),
      ...(options.shared === undefined ? {} : { shared: options.shared }),
    });
    tls?.onChange((pair) => http.setCertificate(pair));
    if (tls !== undefined) {
      // Gateway-to-engine traffic across machines goes through each node's TLS forwarder, whose
      // certificate the cluster CA signs (made even where the operator's own certificate serves).
      const ca =
        tls.ca ??
        (await clusterCa({ shared: store.shared, seal: keys, dataDir: options.settings.settings.data_dir }));
      hub.issueNodeCertificates(nodeCertificates(ca));
      engineCa = ca.cert;
    }
    if (tls !== undefined)
      logger.info(
        {
          fingerprint: fingerprint(tls.current.cert),
          ...(tls.ca === undefined
            ? { certificate: tlsSettings.cert }
            : {
                caHash: publicKeyHash(tls.ca.cert),
                caFile: join(tlsDir(options.settings.settings.data_dir), 'ca.pem'),
              }),
        },
        'serving HTTPS',
      );
    http.onUpgrade(agentChannelPath, (req, socket, head) => {
      hub.handleUpgrade(req, socket, head);
    });
    // Ahead of the API's mount (a longer prefix wins): blobs are streamed on node:http, not through hono.
    http.mount(mirrorPrefix, mirrorRoute({ mirror, authorize: mirrorAuthorizer({ store, auth }), logger }));
    const apiListener = getRequestListener(api.fetch);
    http.mount(`${apiPrefix}/`, (req, res) => {
      void apiListener(req, res);
    });
    // The web console takes every path no other part serves, but the API's and the gateway's.
    http.fallback(
      consoleRoute({ notFound, ...(options.consoleDir === undefined ? {} : { dir: options.consoleDir }) }),
    );
    url = await http.listen(listen);
    settings.onChange((next, previous) => {
      logger.info({ from: previous.source.path }, 'settings replaced');
      void origins.declaredChanged(next.settings.models, previous.settings.models);
      const restart = diffSettings(previous.settings, next.settings).restartRequired;
      if (restart.length > 0) logger.warn({ keys: restart }, 'these settings take effect at the next start');
    });
    logger.info(
      {
        url,
        store: store.dialect,
        settings: options.settings.source.path,
        declaredModels: options.settings.settings.models.length,
      },
      'control plane listening',
    );
    return new ControlPlane({
      url,
      generatedAdminKey: generated,
      settings,
      catalog,
      origins,
      store,
      http,
      logger,
      registry,
      hub,
      fleet,
      auth,
      mirror,
      events,
      traffic,
      leadership,
      tls,
      autoscaler,
    });
  }

  /** Serves another part (the gateway) on this address, under a path prefix. */
  mount(prefix: string, handler: RequestHandler): void {
    this.#http.mount(prefix, handler);
  }

  /** The same on the front door's fast path (see HttpServer.fastLane). */
  fastLane(prefix: string, o: Parameters<HttpServer['fastLane']>[1]): void {
    this.#http.fastLane(prefix, o);
  }

  /** Work to finish once requests have stopped and before the store closes (writing counted usage). */
  beforeStoreClose(work: () => Promise<void>): void {
    this.#beforeStoreClose.push(work);
  }

  /** Stops taking requests, finishes those in flight, then closes the store. */
  async stop(): Promise<void> {
    this.#logger.info('control plane stopping');
    await this.autoscaler.stop();
    await this.fleet.stop();
    // Given up now, so that another control plane leads at once rather than when it expires.
    await this.leadership.stop();
    await this.origins.stop();
    this.#hub.close();
    // Before the server closes: it waits for open answers, and an event stream never ends by itself.
    this.events.close();
    this.traffic.stop();
    this.tls?.stop();
    await this.#http.close();
    await this.mirror.close();
    await this.registry.stop();
    for (const work of this.#beforeStoreClose) await work();
    await this.store.close();
    this.#logger.info('control plane stopped');
  }
}
