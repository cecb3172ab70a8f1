import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
  type KeyObject,
} from 'node:crypto';
import { isIP } from 'node:net';

import { LlmgwError } from '../core/errors.js';

import {
  bitString,
  boolean,
  explicit,
  implicitPrimitive,
  octetString,
  oid,
  sequence,
  set,
  smallInteger,
  time,
  tlv,
  unsignedInteger,
  utf8String,
} from './der.js';

/** A certificate and its private key, both PEM. */
export interface CertificatePair {
  cert: string;
  key: string;
}

export interface IssueOptions {
  commonName: string;
  /** Host names the certificate is valid for (subjectAltName dNSName). */
  dnsNames?: readonly string[];
  /** IPv4 and IPv6 addresses it is valid for (subjectAltName iPAddress). */
  ips?: readonly string[];
  /** Lifetime in days (default 365); `lifetimeMs` wins when given (tests make short ones). */
  days?: number;
  lifetimeMs?: number;
  /** Both by default: serving (control planes) and client (nodes) certificates alike. */
  usage?: 'server' | 'client' | 'both';
  now?: Date;
}

const dayMs = 86_400_000;
// Clocks of machines differ a little: a certificate made now is valid from a few minutes ago.
const backdateMs = 5 * 60_000;

const oids = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectAltName: '2.5.29.17',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
};

/** The cluster's certificate authority: ECDSA P-256, ten years unless told. */
export function createCa(o: { commonName?: string; days?: number; now?: Date } = {}): CertificatePair {
  const { privateKey, publicKey } = newKey();
  const now = o.now ?? new Date();
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const name = distinguishedName(o.commonName ?? 'llmgw cluster CA');
  const cert = signCertificate({
    issuer: name,
    subject: name,
    spki,
    notBefore: new Date(now.getTime() - backdateMs),
    notAfter: new Date(now.getTime() + (o.days ?? 3650) * dayMs),
    extensions: [
      extension(oids.basicConstraints, true, sequence(boolean(true), smallInteger(0))),
      // digitalSignature, keyCertSign, cRLSign: bits 0, 5 and 6.
      extension(oids.keyUsage, true, keyUsageBits(0x86, 1)),
      extension(oids.subjectKeyId, false, octetString(keyId(spki))),
    ],
    signer: privateKey,
  });
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** A certificate signed by `ca`, for a control plane's address or a node (one year unless told). */
export function issueCertificate(ca: CertificatePair, o: IssueOptions): CertificatePair {
  const caCert = readCertificate(ca.cert);
  const caKey = createPrivateKey(ca.key);
  const { privateKey, publicKey } = newKey();
  const now = o.now ?? new Date();
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const caSpki = caCert.publicKey.export({ type: 'spki', format: 'der' });
  const names = [
    ...(o.dnsNames ?? []).map((n) => implicitPrimitive(2, Buffer.from(n, 'latin1'))),
    ...(o.ips ?? []).map((ip) => implicitPrimitive(7, ipBytes(ip))),
  ];
  const usage = o.usage ?? 'both';
  const purposes = [
    ...(usage === 'client' ? [] : [oid(oids.serverAuth)]),
    ...(usage === 'server' ? [] : [oid(oids.clientAuth)]),
  ];
  const cert = signCertificate({
    issuer: caCert.raw.subarray(...subjectRange(caCert)),
    subject: distinguishedName(o.commonName),
    spki,
    notBefore: new Date(now.getTime() - backdateMs),
    notAfter: new Date(now.getTime() + (o.lifetimeMs ?? (o.days ?? 365) * dayMs)),
    extensions: [
      extension(oids.basicConstraints, true, sequence()),
      // digitalSignature: bit 0 (ECDSA keys sign; they do not encipher).
      extension(oids.keyUsage, true, keyUsageBits(0x80, 7)),
      extension(oids.extKeyUsage, false, sequence(...purposes)),
      ...(names.length === 0 ? [] : [extension(oids.subjectAltName, false, sequence(...names))]),
      extension(oids.subjectKeyId, false, octetString(keyId(spki))),
      extension(oids.authorityKeyId, false, sequence(implicitPrimitive(0, keyId(caSpki)))),
    ],
    signer: caKey,
  });
  if (!new X509Certificate(cert).verify(caCert.publicKey))
    throw new LlmgwError('internal', 'the certificate just issued does not verify against its CA');
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/**
 * `sha256:<hex>` of a certificate's public key (its DER SubjectPublicKeyInfo), as kubeadm's
 * --discovery-token-ca-cert-hash: it names the CA whatever certificate it is reissued in.
 */
export function publicKeyHash(certPem: string): string {
  const spki = readCertificate(certPem).publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}

/** SHA-256 of the certificate's DER, as browsers and openssl show it: `AA:BB:...`. */
export function fingerprint(certPem: string): string {
  return readCertificate(certPem).fingerprint256;
}

export function expiresAt(certPem: string): Date {
  return new Date(readCertificate(certPem).validTo);
}

/**
 * Due for renewal when less than 30 days, or a third of its lifetime if that is shorter,
 * is left (a year-long certificate a month ahead; a short one in tests proportionally).
 */
export function needsRenewal(certPem: string, now: Date = new Date()): boolean {
  const c = readCertificate(certPem);
  const from = Date.parse(c.validFrom);
  const to = Date.parse(c.validTo);
  const margin = Math.min(30 * dayMs, (to - from) / 3);
  return to - now.getTime() < margin;
}

/** When `needsRenewal` turns true. */
export function renewalDue(certPem: string): Date {
  const c = readCertificate(certPem);
  const from = Date.parse(c.validFrom);
  const to = Date.parse(c.validTo);
  return new Date(to - Math.min(30 * dayMs, (to - from) / 3));
}

/** Every certificate in a PEM bundle, in order. */
export function splitPem(pem: string): string[] {
  return (
    pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((c) => `${c}\n`) ?? []
  );
}

export function readCertificate(pem: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (e) {
    throw new LlmgwError('invalid_argument', `not a PEM certificate (${(e as Error).message})`, { cause: e });
  }
}

function newKey(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
}

function distinguishedName(commonName: string): Buffer {
  return sequence(
    set(sequence(oid(oids.organization), utf8String('llmgw'))),
    set(sequence(oid(oids.commonName), utf8String(commonName))),
  );
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

function keyUsageBits(byte: number, unused: number): Buffer {
  return tlv(0x03, Buffer.from([unused, byte]));
}

function keyId(spki: Buffer): Buffer {
  return createHash('sha1').update(spki).digest();
}

function signCertificate(c: {
  issuer: Buffer;
  subject: Buffer;
  spki: Buffer;
  notBefore: Date;
  notAfter: Date;
  extensions: Buffer[];
  signer: KeyObject;
}): string {
  const algorithm = sequence(oid(oids.ecdsaWithSha256));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const tbs = sequence(
    explicit(0, smallInteger(2)),
    unsignedInteger(serial),
    algorithm,
    c.issuer,
    sequence(time(c.notBefore), time(c.notAfter)),
    c.subject,
    c.spki,
    explicit(3, sequence(...c.extensions)),
  );
  const signature = sign('sha256', tbs, { key: c.signer, dsaEncoding: 'der' });
  const der = sequence(tbs, algorithm, bitString(signature));
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/**
 * Where the subject Name lies in a certificate's DER, so an issued certificate's issuer
 * is the CA's subject byte for byte (chain building compares them as encoded).
 */
function subjectRange(cert: X509Certificate): [number, number] {
  const der = cert.raw;
  let at = headerEnd(der, 0); // into Certificate
  at = headerEnd(der, at); // into TBSCertificate
  // version [0], serial, signature algorithm, issuer, validity: skipped; the subject follows.
  if (der[at] === 0xa0) at = elementEnd(der, at);
  for (let i = 0; i < 4; i++) at = elementEnd(der, at);
  return [at, elementEnd(der, at)];
}

function lengthAt(der: Buffer, at: number): { length: number; header: number } {
  const first = der[at + 1] ?? 0;
  if (first < 0x80) return { length: first, header: 2 };
  const count = first & 0x7f;
  let length = 0;
  for (let i = 0; i < count; i++) length = length * 256 + (der[at + 2 + i] ?? 0);
  return { length, header: 2 + count };
}

function headerEnd(der: Buffer, at: number): number {
  return at + lengthAt(der, at).header;
}

function elementEnd(der: Buffer, at: number): number {
  const { length, header } = lengthAt(der, at);
  return at + header + length;
}

/** An IP address's bytes: 4 for IPv4, 16 for IPv6 (`::` and a trailing IPv4 part allowed). */
export function ipBytes(ip: string): Buffer {
  const version = isIP(ip);
  if (version === 4) return Buffer.from(ip.split('.').map(Number));
  if (version !== 6)
    throw new LlmgwError('invalid_argument', `"${ip}" is not an IP address: write e.g. 10.0.0.5 or fd00::5`);
  const [head = '', tail] = ip.split('::');
  const groups = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((g) => {
      if (!g.includes('.')) return [parseInt(g, 16)];
      const [a = 0, b = 0, c = 0, d = 0] = g.split('.').map(Number);
      return [a * 256 + b, c * 256 + d];
    });
  };
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const all = [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}
