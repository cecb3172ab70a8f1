import { createHash, X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:tls';

import { describe, expect, it } from 'vitest';

import {
  createCa,
  expiresAt,
  fingerprint,
  ipBytes,
  issueCertificate,
  needsRenewal,
  publicKeyHash,
  renewalDue,
  splitPem,
} from './certificates.js';

const ca = createCa();
const day = 86_400_000;

describe('cluster CA', () => {
  it('is a self-signed CA of ECDSA P-256 valid for about ten years', () => {
    const c = new X509Certificate(ca.cert);
    expect(c.ca).toBe(true);
    expect(c.verify(c.publicKey)).toBe(true);
    expect(c.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const years = (Date.parse(c.validTo) - Date.now()) / (365.25 * day);
    expect(years).toBeGreaterThan(9.9);
    expect(years).toBeLessThan(10.1);
  });

  it('hashes its public key as kubeadm does: sha256 of the DER SubjectPublicKeyInfo', () => {
    const spki = new X509Certificate(ca.cert).publicKey.export({ type: 'spki', format: 'der' });
    expect(publicKeyHash(ca.cert)).toBe(`sha256:${createHash('sha256').update(spki).digest('hex')}`);
    expect(publicKeyHash(ca.cert)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(publicKeyHash(createCa().cert)).not.toBe(publicKeyHash(ca.cert));
  });

  it('fingerprints a certificate as SHA-256 of its DER in AA:BB form', () => {
    const der = new X509Certificate(ca.cert).raw;
    const hex = createHash('sha256').update(der).digest('hex').toUpperCase();
    expect(fingerprint(ca.cert)).toBe(hex.match(/../g)?.join(':'));
  });
});

describe('issued certificates', () => {
  const issued = issueCertificate(ca, {
    commonName: 'cp-1',
    dnsNames: ['cp-1.example', 'localhost'],
    ips: ['127.0.0.1', '10.1.2.3', '::1', 'fd00::1:2'],
  });
  const c = new X509Certificate(issued.cert);

  it('chain to the CA and are no CA themselves', () => {
    expect(c.checkIssued(new X509Certificate(ca.cert))).toBe(true);
    expect(c.verify(new X509Certificate(ca.cert).publicKey)).toBe(true);
    expect(c.ca).toBe(false);
    expect(c.issuer).toBe(new X509Certificate(ca.cert).subject);
  });

  it.each([
    ['cp-1.example', 'host', true],
    ['localhost', 'host', true],
    ['other.example', 'host', false],
    ['127.0.0.1', 'ip', true],
    ['10.1.2.3', 'ip', true],
    ['::1', 'ip', true],
    ['fd00::1:2', 'ip', true],
    ['10.1.2.4', 'ip', false],
  ] as const)('name %s (%s) valid: %s', (name, kind, valid) => {
    const hit = kind === 'host' ? c.checkHost(name) : c.checkIP(name);
    expect(hit !== undefined).toBe(valid);
  });

  it('last a year unless told, or as long as asked', () => {
    expect(Math.round((expiresAt(issued.cert).getTime() - Date.now()) / day)).toBe(365);
    const short = issueCertificate(ca, { commonName: 'n', days: 7 });
    expect(Math.round((expiresAt(short.cert).getTime() - Date.now()) / day)).toBe(7);
  });

  it('serve a real TLS handshake checked against the CA and the host name', async () => {
    const server = createServer({ cert: issued.cert + ca.cert, key: issued.key }, (s) => s.end('hi'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    try {
      const socket = connect({ host: '127.0.0.1', port, ca: ca.cert, servername: 'cp-1.example' });
      const [data] = (await once(socket, 'data')) as [Buffer];
      expect(data.toString()).toBe('hi');
      expect(socket.authorized).toBe(true);
      socket.destroy();
      const wrong = connect({ host: '127.0.0.1', port, ca: createCa().cert, servername: 'cp-1.example' });
      const [e] = (await once(wrong, 'error')) as [NodeJS.ErrnoException];
      // The server sends its CA along, which the client does not trust.
      expect(e.code).toBe('SELF_SIGNED_CERT_IN_CHAIN');
    } finally {
      server.close();
    }
  });
});

describe('renewal', () => {
  it.each([
    ['a year-long certificate with 31 days left', 365 * day, 334 * day, false],
    ['a year-long certificate with 29 days left', 365 * day, 336 * day, true],
    ['an hour-long certificate with 30 minutes left', 3_600_000, 1_800_000, false],
    ['an hour-long certificate with 19 minutes left', 3_600_000, 2_460_000, true],
  ])('%s: due %s', (_what, lifetimeMs, elapsedMs, due) => {
    const now = new Date('2030-01-01T00:00:00Z');
    const c = issueCertificate(ca, { commonName: 'x', lifetimeMs, now });
    // Issued certificates are backdated 5 minutes for clock skew.
    const at = new Date(now.getTime() + elapsedMs);
    expect(needsRenewal(c.cert, at)).toBe(due);
  });

  it('says when it falls due', () => {
    const now = new Date('2030-01-01T00:00:00Z');
    const c = issueCertificate(ca, { commonName: 'x', days: 365, now });
    expect(renewalDue(c.cert).toISOString()).toBe('2030-12-02T00:00:00.000Z');
  });
});

describe('helpers', () => {
  it.each([
    ['10.0.0.5', '0a000005'],
    ['::1', '00000000000000000000000000000001'],
    ['fd00::1:2', 'fd000000000000000000000000010002'],
    ['::ffff:10.0.0.1', '00000000000000000000ffff0a000001'],
  ])('%s in bytes', (ip, hex) => {
    expect(ipBytes(ip).toString('hex')).toBe(hex);
  });

  it('refuses what is not an address, saying what to write', () => {
    expect(() => ipBytes('host.example')).toThrow(/not an IP address: write e.g. 10.0.0.5/);
  });

  it('splits a PEM bundle', () => {
    expect(splitPem(ca.cert + issueCertificate(ca, { commonName: 'x' }).cert)).toHaveLength(2);
  });
});
