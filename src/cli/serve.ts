import type { Logger } from 'pino';

import type { LoadOptions, Settings } from '../config/load.js';
import { ControlPlane } from '../server/control-plane.js';
import { openStore } from '../store/open.js';
import type { Store } from '../store/store.js';
import type { HeldLock } from '../agent/installer/install-lock.js';

import { stringOpt } from './command.js';
import { readLogin, saveLogin } from './ctl/login-file.js';
import { lockAgentDir, lockDatabase } from './instance-lock.js';
import { createLogger } from './logger.js';
import type { Output } from './output.js';
import { describeFix, secureDataDir, secureSqliteFile, type OnFixed } from './private-files.js';
import { commandSettings } from './settings.js';
import { loadIdentity } from '../agent/identity.js';
import { generateSecret, hashSecret, secretPrefix } from '../core/secrets.js';
import { newWorkerPool, startLocalGateway } from './gateway-compose.js';
import { startNodeAgent, type NodeAgent } from './node-agent.js';
import { version } from './version.js';
import { publicKeyHash } from '../tls/certificates.js';
import { joinTokenWithHash } from '../tls/trust.js';
import { untilSignalled } from './signals.js';
import { keysFromCluster } from '../kube/keys-secret.js';

export interface ServeOptions {
  mode: 'server' | 'up';
  opts: Record<string, unknown>;
  o: Output;
}

export async function serve({ mode, opts, o }: ServeOptions): Promise<void> {
  const logger = createLogger(mode === 'up' ? 'llmgw-up' : 'control-plane');
  // Watched from the start: a signal while starting stops llmgw, engines included, once it has started.
  const stopped = untilSignalled(logger);
  const loadOptions: LoadOptions = { path: stringOpt(opts, 'config'), env: process.env };
  // An invalid settings file is refused before anything starts.
  const loaded = commandSettings(loadOptions);
  for (const w of loaded.warnings) logger.warn(w);
  const onFixed: OnFixed = (f) => logger.warn(f, describeFix(f));
  // The control plane keeps its id (and, unless given, the engine keys' secret) in the data dir;
  // `up` runs this machine's agent, which keeps its files there too.
  secureDataDir(loaded.settings.data_dir, { create: true, onFixed });
  const sqlite = loaded.settings.database.startsWith('sqlite:')
    ? loaded.settings.database.slice('sqlite:'.length)
    : undefined;
  if (sqlite !== undefined) secureSqliteFile(sqlite, onFixed);
  const locks: HeldLock[] = [];
  const unlock = async () => {
    for (const l of locks.splice(0)) await l.release();
  };
  let store: Store;
  try {
    if (sqlite !== undefined && sqlite !== ':memory:') locks.push(await lockDatabase(sqlite));
    if (mode === 'up') locks.push(await lockAgentDir(loaded.settings.data_dir));
    store = await openStore(loaded.settings.database);
  } catch (e) {
    await unlock();
    throw e;
  }
  let cp: ControlPlane;
  // The gateway's processes (gateway.workers): they take the listen address, and relay what is not /v1 here.
  const gatewayLogger = createLogger('gateway', process.env, { async: true });
  const pool = newWorkerPool(loaded.settings, gatewayLogger);
  try {
    // Kubernetes mode with kubernetes.keys_secret: what the environment does not give is kept in that Secret.
    const keys = await keysFromCluster(loaded.settings.kubernetes, {
      adminKey: process.env['LLMGW_ADMIN_KEY'],
      engineKeySecret: process.env['LLMGW_ENGINE_KEY_SECRET'],
    });
    cp = await ControlPlane.start({
      settings: loaded,
      loadOptions,
      store,
      logger,
      version,
      adminKey: keys.adminKey,
      engineKeySecret: keys.engineKeySecret,
      ...(keys.engineKeySource === undefined ? {} : { engineKeySecretSource: keys.engineKeySource }),
      ...(pool === undefined ? {} : { shared: pool }),
      ...(stringOpt(opts, 'listen') === undefined ? {} : { listen: stringOpt(opts, 'listen') }),
    });
  } catch (e) {
    await store.close();
    await unlock();
    throw e;
  }
  // The OpenAI-compatible gateway on the same address: /v1, and its /metrics.
  await startLocalGateway(cp, { logger: gatewayLogger, settings: loaded.settings, pool });
  if (pool !== undefined) logger.info({ workers: pool.pids() }, 'gateway workers serving');
  if (cp.generatedAdminKey !== undefined)
    announceAdminKey({ mode, o, url: cp.url, key: cp.generatedAdminKey, logger });
  // `llmgw up` is also this machine's node: its agent runs here, joined over loopback.
  let agent: NodeAgent | undefined;
  try {
    if (mode === 'up' && loaded.settings.kubernetes !== undefined)
      logger.info('kubernetes mode: engines run as pods of the cluster, so no agent runs on this machine');
    else if (mode === 'up') agent = await startLocalAgent(cp, loaded.settings);
  } catch (e) {
    // A node identity it cannot read, say: refused, and nothing left listening.
    await cp.stop();
    await unlock();
    throw e;
  }
  await stopped;
  await agent?.stop();
  await cp.stop();
  await unlock();
}

/** Shown once, on the first start: only the key's hash is kept. */
function announceAdminKey(a: {
  mode: 'server' | 'up';
  o: Output;
  url: string;
  key: string;
  logger: Logger;
}): void {
  let savedTo: string | undefined;
  // `llmgw up` is one person on one machine: save the login as kind or minikube save a kubeconfig,
  // unless one for another server is already saved.
  if (a.mode === 'up') {
    const existing = readLogin(process.env, (f) => a.logger.warn(f, describeFix(f)));
    if (existing === undefined || existing.server === a.url)
      savedTo = saveLogin({ server: a.url, key: a.key });
  }
  if (a.o.json) {
    a.o.out(
      JSON.stringify({
        admin_key: a.key,
        server: a.url,
        ...(savedTo === undefined ? {} : { saved_to: savedTo }),
      }),
    );
  } else {
    a.o.out(
      [
        '',
        'An admin key was created for this cluster. It is shown only this once (llmgw keeps only its hash):',
        '',
        `    ${a.key}`,
        '',
        savedTo === undefined
          ? `Use it with: llmgw ctl login --server ${a.url} --key <the key>`
          : `llmgw ctl is logged in with it (saved to ${savedTo}).`,
        '',
      ].join('\n'),
    );
  }
  a.logger.info({ url: a.url }, 'admin key created and shown once');
}

async function startLocalAgent(cp: ControlPlane, settings: Settings): Promise<NodeAgent> {
  const logger = createLogger('agent');
  const identity = loadIdentity(settings.data_dir);
  let token: string | undefined;
  let tokenName: string | undefined;
  if (identity.credential === undefined || identity.server !== cp.url) {
    // A short-lived token for this one join, revoked once it is used.
    token = generateSecret('join');
    tokenName = `up-${identity.id.slice(0, 8)}-${Date.now().toString(36)}`;
    await cp.store.joinTokens.create(
      {
        name: tokenName,
        prefix: secretPrefix(token),
        secretHash: hashSecret(token),
        expiresAt: new Date(Date.now() + 10 * 60_000).toISOString(),
      },
      'system',
    );
  }
  // Over https the token carries the CA's hash, as a printed one does: the agent pins the CA.
  const ca = cp.tls?.ca;
  const joinToken =
    token === undefined
      ? undefined
      : joinTokenWithHash(token, ca === undefined ? undefined : publicKeyHash(ca.cert));
  const node = await startNodeAgent({ server: cp.url, token: joinToken, settings, logger });
  node.agent
    .run()
    .catch((e: unknown) =>
      logger.error({ err: e instanceof Error ? e.message : String(e) }, 'the local agent stopped'),
    );
  if (tokenName !== undefined) {
    const name = tokenName;
    node.agent.joined
      .then(
        () => cp.store.joinTokens.revoke(name, 'system'),
        () => undefined,
      )
      .catch(() => undefined);
  }
  return node;
}
