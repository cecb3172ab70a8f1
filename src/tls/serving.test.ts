import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import { loadSettings, SettingsError } from '../config/load.js';

import { createCa, fingerprint, issueCertificate } from './certificates.js';
import { clusterCa, type KeySeal, type SharedValues } from './cluster-ca.js';
import { isLoopbackHost, ServingCertificates, servingNames, tlsWanted } from './serving.js';

function memoryShared(): SharedValues {
  const values = new Map<string, string>();
  return {
    get: (k) => Promise.resolve(values.get(k)),
    putIfAbsent: (k, v) => {
      if (!values.has(k)) values.set(k, v);
      return Promise.resolve(values.get(k) ?? v);
    },
    replace: (k, from, to) => {
      if (values.get(k) === from) values.set(k, to);
      return Promise.resolve(values.get(k) ?? to);
    },
  };
}

/** Sealing as the CA sees it; the real one (EngineKeys) is tested with the stores in test/cluster-ca.test.ts. */
const seal: KeySeal = {
  source: 'test',
  seal: (id, text) => Buffer.from(`${id}\n${text}`).toString('base64'),
  open: (id, sealed) =>
    Buffer.from(sealed, 'base64')
      .toString()
      .slice(id.length + 1),
};

function settingsRefusal(text: string): string {
  const d = mkdtempSync(join(tmpdir(), 'llmgw-tls-settings-'));
  writeFileSync(join(d, 'llmgw.yaml'), text);
  try {
    loadSettings({ path: join(d, 'llmgw.yaml'), env: { LLMGW_DATA_DIR: d }, cwd: d });
  } catch (e) {
    if (e instanceof SettingsError) return e.message;
    throw e;
  }
  throw new Error('expected the settings to be refused');
}

describe('tls settings', () => {
  it.each([
    ['tls:\n  cert: c.pem\n', 'tls.cert is set without tls.key: give both tls.cert and tls.key'],
    ['tls:\n  key: k.pem\n', 'tls.key is set without tls.cert: give both tls.cert and tls.key'],
    ['tls:\n  enabled: yes please\n', 'true or false'],
    ['tls:\n  san: ["has space"]\n', 'a host name or an IP address, e.g. llmgw.example.com or 10.0.0.5'],
    ['tls:\n  sans: []\n', 'sans'],
  ])('refuses %j saying what to write', (text, message) => {
    expect(settingsRefusal(text)).toContain(message);
  });

  it('resolves the certificate paths against the working directory', () => {
    const d = mkdtempSync(join(tmpdir(), 'llmgw-tls-settings-'));
    writeFileSync(join(d, 'llmgw.yaml'), 'tls:\n  cert: c.pem\n  key: k.pem\n');
    const { settings } = loadSettings({ path: join(d, 'llmgw.yaml'), env: { LLMGW_DATA_DIR: d }, cwd: d });
    expect(settings.tls).toEqual({ cert: join(d, 'c.pem'), key: join(d, 'k.pem'), san: [] });
  });
});

describe('when TLS is on', () => {
  it.each([
    ['127.0.0.1', undefined, false],
    ['localhost', undefined, false],
    ['::1', undefined, false],
    ['127.0.0.1', true, true],
    ['0.0.0.0', undefined, true],
    [undefined, undefined, true],
    ['10.0.0.5', undefined, true],
    ['10.0.0.5', false, false],
  ] as const)('listening on %s with tls.enabled %s: %s', (host, enabled, on) => {
    expect(tlsWanted(host, enabled === undefined ? {} : { enabled })).toBe(on);
  });

  it('knows loopback', () => {
    expect(isLoopbackHost('127.8.9.10')).toBe(true);
    expect(isLoopbackHost('128.0.0.1')).toBe(false);
  });

  it('names the listen address, this machine, loopback and tls.san', () => {
    const n = servingNames('10.0.0.5', ['lb.example.com', '192.168.1.1']);
    expect(n.ips).toEqual(expect.arrayContaining(['127.0.0.1', '::1', '10.0.0.5', '192.168.1.1']));
    expect(n.dnsNames).toEqual(expect.arrayContaining(['localhost', 'lb.example.com']));
  });
});

describe('serving certificates', () => {
  const logger = pino({ level: 'silent' });
  const tls = { san: [] as string[] };

  it('share one CA between control planes on one store, and keep their own serving pair', async () => {
    const shared = memoryShared();
    const [a, b] = [mkdtempSync(join(tmpdir(), 'cp-a-')), mkdtempSync(join(tmpdir(), 'cp-b-'))];
    const [ca1, ca2] = await Promise.all([
      clusterCa({ shared, seal, dataDir: a }),
      clusterCa({ shared, seal, dataDir: b }),
    ]);
    expect(ca1.cert).toBe(ca2.cert);
    expect(readFileSync(join(b, 'tls', 'ca.pem'), 'utf8')).toBe(ca1.cert);
    const s = await ServingCertificates.start({ shared, seal, dataDir: a, host: '127.0.0.1', tls, logger });
    const again = await ServingCertificates.start({
      shared,
      seal,
      dataDir: a,
      host: '127.0.0.1',
      tls,
      logger,
    });
    // Kept across restarts while good and covering the same names.
    expect(again.current.cert).toBe(s.current.cert);
    const wider = await ServingCertificates.start({
      shared,
      seal,
      dataDir: a,
      host: '127.0.0.1',
      tls: { san: ['new.example'] },
      logger,
    });
    expect(wider.current.cert).not.toBe(s.current.cert);
    for (const x of [s, again, wider]) x.stop();
  });

  it('read own certificate files again, and keep the served one when the new one is unreadable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'own-'));
    const ca = createCa();
    const write = (cn: string) => {
      const p = issueCertificate(ca, { commonName: cn, ips: ['127.0.0.1'] });
      writeFileSync(join(dir, 'c.pem'), p.cert);
      writeFileSync(join(dir, 'k.pem'), p.key);
      return p;
    };
    const first = write('first');
    const s = await ServingCertificates.start({
      shared: memoryShared(),
      seal,
      dataDir: dir,
      host: '127.0.0.1',
      tls: { cert: join(dir, 'c.pem'), key: join(dir, 'k.pem'), san: [] },
      logger,
      rereadMs: 50,
    });
    try {
      expect(s.ca).toBeUndefined();
      expect(fingerprint(s.current.cert)).toBe(fingerprint(first.cert));
      const changed = new Promise<string>((resolve) => s.onChange((p) => resolve(p.cert)));
      writeFileSync(join(dir, 'c.pem'), 'not a certificate');
      await new Promise((r) => setTimeout(r, 150));
      expect(s.current.cert).toBe(first.cert);
      const second = write('second');
      expect(fingerprint(await changed)).toBe(fingerprint(second.cert));
    } finally {
      s.stop();
    }
  });

  it('refuse unreadable own files, naming both paths', async () => {
    await expect(
      ServingCertificates.start({
        shared: memoryShared(),
        seal,
        dataDir: '/nonexistent',
        host: '127.0.0.1',
        tls: { cert: '/nonexistent/c.pem', key: '/nonexistent/k.pem', san: [] },
        logger,
      }),
    ).rejects.toThrow('cannot read tls.cert /nonexistent/c.pem or tls.key /nonexistent/k.pem');
  });
});
