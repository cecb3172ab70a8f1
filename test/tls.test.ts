import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Agent } from '../src/agent/agent.js';
import { ApiClient } from '../src/client/api-client.js';
import { loadSettings } from '../src/config/load.js';
import { ControlPlane } from '../src/server/control-plane.js';
import { openStore } from '../src/store/open.js';
import { createCa, fingerprint, issueCertificate, publicKeyHash } from '../src/tls/certificates.js';
import {
  agentTrust,
  fetchTrusting,
  joinTokenWithHash,
  presentedChain,
  splitJoinToken,
} from '../src/tls/trust.js';

import { llmgw } from './support/cli.js';
import { a100, inventoryWith } from './support/inventory.js';

const quiet = pino({ level: 'silent' });

interface Started {
  cp: ControlPlane;
  dir: string;
  adminKey: string;
  logs: () => string;
  stop: () => Promise<void>;
}

/** A control plane on 127.0.0.1:0 with the settings given, its own data dir and SQLite file. */
async function start(config: string, o: { servingLifetimeMs?: number; dir?: string } = {}): Promise<Started> {
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), 'llmgw-tls-'));
  writeFileSync(join(dir, 'config.yaml'), config);
  const env = {
    LLMGW_DATA_DIR: dir,
    LLMGW_CONFIG: join(dir, 'config.yaml'),
    HF_ENDPOINT: 'http://127.0.0.1:9',
  };
  const loadOptions = { env, cwd: dir };
  const settings = loadSettings(loadOptions);
  let text = '';
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _e, cb) {
        text += chunk.toString();
        cb();
      },
    }),
  );
  const store = await openStore(settings.settings.database);
  const adminKey = 'llmgw_key_tlstestadminkeyAAAAAAAAAAAAAAAAAAA';
  const cp = await ControlPlane.start({
    settings,
    loadOptions,
    store,
    logger,
    version: 'test',
    adminKey,
    listen: '127.0.0.1:0',
    heartbeatMs: 200,
    ...(o.servingLifetimeMs === undefined ? {} : { servingLifetimeMs: o.servingLifetimeMs }),
  });
  return {
    cp,
    dir,
    adminKey,
    logs: () => text,
    stop: async () => {
      await cp.stop();
    },
  };
}

describe('a control plane on TLS with its own CA', () => {
  let t: Started;
  let ca: string;
  const agents: Agent[] = [];

  beforeAll(async () => {
    t = await start('tls:\n  enabled: true\n  san: [cp.example.test, 10.9.8.7]\n');
    ca = readFileSync(join(t.dir, 'tls', 'ca.pem'), 'utf8');
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await t.stop();
    rmSync(t.dir, { recursive: true, force: true });
  });

  it('serves https, with its CA kept in the store and a copy in DATA_DIR/tls/ca.pem', async () => {
    expect(t.cp.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const raw = (await t.cp.store.shared.get('tls/ca')) ?? '{}';
    const stored = JSON.parse(raw) as { cert?: string; key?: string };
    expect(stored.cert).toBe(ca);
    // Its private key sealed with the engine-key secret: the row alone issues nothing.
    expect(stored.key).toMatch(/^v1:/);
    expect(raw).not.toContain('PRIVATE KEY');
    expect(new X509Certificate(ca).ca).toBe(true);
    expect(t.logs()).toContain('serving HTTPS');
    expect(t.logs()).toContain(publicKeyHash(ca));
  });

  it('names its addresses and tls.san in the serving certificate', async () => {
    const [leaf] = await presentedChain(t.cp.url, { trust: { ca } });
    expect(leaf?.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(leaf?.checkIP('10.9.8.7')).toBe('10.9.8.7');
    expect(leaf?.checkHost('cp.example.test')).toBe('cp.example.test');
  });

  it('answers the API over https to a client trusting the CA', async () => {
    const client = new ApiClient({
      server: t.cp.url,
      key: t.adminKey,
      fetch: fetchTrusting(ca, { repin: 'x' }),
    });
    expect((await client.whoami()).role).toBe('admin');
  });

  it("gives gateways the cluster CA, to verify the nodes' engine forwarders against", async () => {
    const client = new ApiClient({
      server: t.cp.url,
      key: t.adminKey,
      fetch: fetchTrusting(ca, { repin: 'x' }),
    });
    const routes = await client.request<{ ca?: string }>('GET', '/gateway/routes');
    expect(routes.body.ca).toBe(ca);
  });

  it('refuses a client that trusts another CA, naming both fingerprints and how to pin again', async () => {
    const other = createCa().cert;
    const client = new ApiClient({
      server: t.cp.url,
      key: t.adminKey,
      fetch: fetchTrusting(other, { repin: 'llmgw ctl login --pin-again' }),
    });
    const e = await client.whoami().then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    const [leaf] = await presentedChain(t.cp.url);
    expect(e?.message).toContain(`presented a certificate (SHA-256 ${fingerprint(leaf?.toString() ?? '')})`);
    expect(e?.message).toContain(`the CA pinned for it (SHA-256 ${fingerprint(other)})`);
    expect(e?.message).toContain('llmgw ctl login --pin-again');
  });

  it('answers plain http with a clear error naming the https URL', async () => {
    const plain = t.cp.url.replace('https:', 'http:');
    const e = await new ApiClient({ server: plain, key: t.adminKey }).whoami().then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(e?.message).toContain(`this address serves HTTPS only: use https://${new URL(plain).host}/`);
  });

  it('lets an agent join with a token carrying the CA hash, and pins the CA', async () => {
    const client = new ApiClient({
      server: t.cp.url,
      key: t.adminKey,
      fetch: fetchTrusting(ca, { repin: 'x' }),
    });
    const created = await client.createJoinToken({ name: 'tls-node' });
    const token = joinTokenWithHash(created.secret, publicKeyHash(ca));
    expect(token).toMatch(/^llmgw_join_\w+\.[0-9a-f]{64}$/);
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-'));
    const pinFile = join(dataDir, 'agent', 'server-ca.pem');
    const given = splitJoinToken(token);
    const trusted = await agentTrust({ server: t.cp.url, pinFile, caHash: given.caHash });
    expect(trusted).toBe(ca);
    expect(readFileSync(pinFile, 'utf8')).toBe(ca);
    const a = new Agent({
      server: t.cp.url,
      token: given.secret,
      dataDir,
      name: 'tls-node',
      logger: quiet,
      inventory: () => Promise.resolve(inventoryWith([a100(0)])),
      backoff: { initialMs: 20, maxMs: 200 },
      tls: { ca: trusted ?? '' },
    });
    agents.push(a);
    void a.run();
    expect((await a.joined).name).toBe('tls-node');
    // Later starts need no hash: the pinned CA is used.
    expect(await agentTrust({ server: t.cp.url, pinFile, caHash: undefined })).toBe(ca);
  });

  it('refuses a token whose CA hash is not the server CA, naming both and what to do', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-'));
    const wrong = publicKeyHash(createCa().cert);
    const e = await agentTrust({
      server: t.cp.url,
      pinFile: join(dataDir, 'agent', 'server-ca.pem'),
      caHash: wrong,
    }).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(e?.message).toContain(`presents a certificate whose CA has key hash ${publicKeyHash(ca)}`);
    expect(e?.message).toContain(`the join token expects ${wrong}`);
    expect(e?.message).toContain('make a new token there with llmgw ctl node token');
    expect(existsSync(join(dataDir, 'agent', 'server-ca.pem'))).toBe(false);
  });

  it('refuses a token with a CA hash on a plain http URL', async () => {
    await expect(
      agentTrust({ server: 'http://127.0.0.1:1', pinFile: '/nonexistent', caHash: publicKeyHash(ca) }),
    ).rejects.toThrow(
      "the join token carries the cluster CA's hash, but --server http://127.0.0.1:1 is plain http: use https://127.0.0.1:1",
    );
  });

  it('the server takes a token as printed, hash and all', async () => {
    const client = new ApiClient({
      server: t.cp.url,
      key: t.adminKey,
      fetch: fetchTrusting(ca, { repin: 'x' }),
    });
    const created = await client.createJoinToken({ name: 'printed' });
    const printed = joinTokenWithHash(created.secret, publicKeyHash(ca));
    expect((await client.checkJoinToken(printed)).name).toBe('printed');
  });
});

describe('renewal and sharing', () => {
  it('replaces a serving certificate near expiry while serving, without a restart', async () => {
    const t = await start('tls:\n  enabled: true\n', { servingLifetimeMs: 4000 });
    try {
      const ca = readFileSync(join(t.dir, 'tls', 'ca.pem'), 'utf8');
      const [first] = await presentedChain(t.cp.url, { trust: { ca } });
      // Due a third of its lifetime before it ends (plus the 5 minutes it is backdated: at once
      // here), so it is renewed within a second or so; each new one is likewise short.
      let next = first;
      for (let i = 0; i < 50 && next?.fingerprint256 === first?.fingerprint256; i++) {
        await new Promise((r) => setTimeout(r, 100));
        [next] = await presentedChain(t.cp.url, { trust: { ca } });
      }
      expect(next?.fingerprint256).not.toBe(first?.fingerprint256);
      expect(next?.verify(new X509Certificate(ca).publicKey)).toBe(true);
      expect(t.logs()).toContain('renewed before expiry');
      expect(readFileSync(join(t.dir, 'tls', 'server.pem'), 'utf8')).toContain(
        next?.toString().trim().split('\n')[1],
      );
    } finally {
      await t.stop();
    }
  });

  it("serves the operator's certificate files when given; the cluster CA signs only the nodes' forwarders", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-tls-own-'));
    const ownCa = createCa({ commonName: 'operator CA' });
    const pair = issueCertificate(ownCa, { commonName: 'own', ips: ['127.0.0.1'] });
    writeFileSync(join(dir, 'cert.pem'), pair.cert + ownCa.cert);
    writeFileSync(join(dir, 'key.pem'), pair.key);
    const t = await start('tls:\n  enabled: true\n  cert: cert.pem\n  key: key.pem\n', { dir });
    try {
      const [leaf] = await presentedChain(t.cp.url, { trust: { ca: ownCa.cert } });
      expect(leaf?.fingerprint256).toBe(fingerprint(pair.cert));
      // No serving certificate of its own is made; the cluster CA is, for engine traffic.
      expect(existsSync(join(dir, 'tls', 'server.pem'))).toBe(false);
      const routes = await new ApiClient({
        server: t.cp.url,
        key: t.adminKey,
        fetch: fetchTrusting(ownCa.cert, { repin: 'x' }),
      }).request<{ ca?: string }>('GET', '/gateway/routes');
      expect(routes.body.ca).toBe(readFileSync(join(dir, 'tls', 'ca.pem'), 'utf8'));
      expect(routes.body.ca).not.toBe(ownCa.cert);
    } finally {
      await t.stop();
    }
  });

  it('is plain HTTP on loopback unless asked', async () => {
    const t = await start('{}\n');
    try {
      expect(t.cp.url).toMatch(/^http:\/\//);
      expect(t.cp.tls).toBeUndefined();
    } finally {
      await t.stop();
    }
  });
});

describe('llmgw ctl login on https', () => {
  let t: Started;
  const home = mkdtempSync(join(tmpdir(), 'llmgw-ctl-'));
  const env = { LLMGW_CTL_CONFIG: join(home, 'ctl.json') };

  beforeAll(async () => {
    t = await start('tls:\n  enabled: true\n');
  });
  afterAll(async () => {
    await t.stop();
  });

  it('shows the fingerprint and pins the CA on first use; later commands use it', async () => {
    const r = await llmgw(['ctl', 'login', '--server', t.cp.url, '--key', t.adminKey], env);
    expect(r.stderr).toBe('');
    const [leaf] = await presentedChain(t.cp.url);
    expect(r.stdout).toContain(`certificate SHA-256 fingerprint: ${fingerprint(leaf?.toString() ?? '')}`);
    expect(r.stdout).toContain('is pinned');
    const saved = JSON.parse(readFileSync(env.LLMGW_CTL_CONFIG, 'utf8')) as { ca?: string };
    expect(saved.ca).toBe(readFileSync(join(t.dir, 'tls', 'ca.pem'), 'utf8'));
    const token = await llmgw(['ctl', 'node', 'token', '--json'], env);
    const printed = JSON.parse(token.stdout) as { secret: string; ca_hash: string; join: string };
    expect(printed.ca_hash).toBe(publicKeyHash(saved.ca ?? ''));
    expect(printed.secret.endsWith(`.${printed.ca_hash.slice('sha256:'.length)}`)).toBe(true);
    expect(printed.join).toBe(`llmgw agent --server ${t.cp.url} --token ${printed.secret}`);
  });

  it('refuses a server whose certificate no longer chains to the pinned CA, then pins again when told', async () => {
    const saved = JSON.parse(readFileSync(env.LLMGW_CTL_CONFIG, 'utf8')) as { ca: string };
    const impostor = createCa().cert;
    writeFileSync(env.LLMGW_CTL_CONFIG, JSON.stringify({ ...saved, ca: impostor }));
    const r = await llmgw(['ctl', 'nodes'], env);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`the CA pinned for it (SHA-256 ${fingerprint(impostor)})`);
    expect(r.stderr).toContain(`llmgw ctl login --server ${t.cp.url} --pin-again`);
    const again = await llmgw(
      ['ctl', 'login', '--server', t.cp.url, '--key', t.adminKey, '--pin-again'],
      env,
    );
    expect(again.code).toBe(0);
    expect((JSON.parse(readFileSync(env.LLMGW_CTL_CONFIG, 'utf8')) as { ca: string }).ca).toBe(saved.ca);
  });
});
