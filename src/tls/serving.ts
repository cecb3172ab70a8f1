import * as fsWatch from 'node:fs';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname, networkInterfaces } from 'node:os';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';

import type { Logger } from 'pino';

import type { TlsSettings } from '../config/schema.js';
import { LlmgwError, messageOf } from '../core/errors.js';

import {
  issueCertificate,
  needsRenewal,
  readCertificate,
  renewalDue,
  type CertificatePair,
} from './certificates.js';
import { clusterCa, readIfThere, tlsDir, type KeySeal, type SharedValues } from './cluster-ca.js';

/** Whether an address is this machine's only: 127.0.0.0/8, ::1, localhost. */
export function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** TLS on the listen address (its host; undefined: every interface): as set, else on exactly when it listens beyond loopback. */
export function tlsWanted(host: string | undefined, tls: Pick<TlsSettings, 'enabled'>): boolean {
  return tls.enabled ?? !isLoopbackHost(host);
}

/** The names a control plane's serving certificate covers: its listen address, this machine, and `san`. */
export function servingNames(
  host: string | undefined,
  san: readonly string[],
): { dnsNames: string[]; ips: string[] } {
  const dns = new Set(['localhost', hostname()]);
  const ips = new Set(['127.0.0.1', '::1']);
  const add = (name: string) => (isIP(name) === 0 ? dns.add(name) : ips.add(name));
  if (host === undefined || host === '0.0.0.0' || host === '::') {
    // Every interface: every address of this machine's, since clients may come to any.
    for (const list of Object.values(networkInterfaces()))
      for (const a of list ?? []) if (!a.internal) ips.add(a.address.replace(/%.*$/, ''));
  } else add(host);
  for (const s of san) add(s);
  return { dnsNames: [...dns], ips: [...ips] };
}

export interface ServingOptions {
  shared: SharedValues;
  /** Seals the CA's key in the store: the control planes' shared secret. */
  seal: KeySeal;
  dataDir: string;
  /** The listen address's host; undefined: every interface. */
  host: string | undefined;
  tls: TlsSettings;
  logger: Logger;
  /** The serving certificate's lifetime (a year); tests shorten it to see it renewed. */
  lifetimeMs?: number;
  /** How often own certificate files are read again (a day); changes are also watched. */
  rereadMs?: number;
}

/** What HttpServer serves: the certificate with its chain, and the key. */
export interface ServingPair {
  cert: string;
  key: string;
}

const dayMs = 86_400_000;
// setTimeout's longest delay is about 24.8 days: longer waits are taken in steps.
const maxTimerMs = 2 ** 31 - 1;

/**
 * This control plane's serving certificate: the operator's own files (tls.cert, tls.key),
 * read again when they change; else one issued by the cluster's CA for the addresses it
 * listens on, kept in DATA_DIR/tls and renewed before it expires. `onChange` gets each new one.
 */
export class ServingCertificates {
  /** The cluster CA's certificate; undefined with own files. */
  readonly ca: CertificatePair | undefined;
  #current: ServingPair;
  #timer: NodeJS.Timeout | undefined;
  #listeners: ((pair: ServingPair) => void)[] = [];
  readonly #o: ServingOptions;
  #stopped = false;

  private constructor(o: ServingOptions, ca: CertificatePair | undefined, current: ServingPair) {
    this.#o = o;
    this.ca = ca;
    this.#current = current;
  }

  static async start(o: ServingOptions): Promise<ServingCertificates> {
    if (o.tls.cert !== undefined && o.tls.key !== undefined) {
      const s = new ServingCertificates(o, undefined, readOwn(o.tls.cert, o.tls.key));
      s.#watchOwn(o.tls.cert, o.tls.key);
      return s;
    }
    const ca = await clusterCa({ shared: o.shared, dataDir: o.dataDir, seal: o.seal });
    const s = new ServingCertificates(o, ca, ServingCertificates.#issued(o, ca));
    s.#scheduleRenewal();
    return s;
  }

  get current(): ServingPair {
    return this.#current;
  }

  onChange(fn: (pair: ServingPair) => void): void {
    this.#listeners.push(fn);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (this.#o.tls.cert !== undefined) fsWatch.unwatchFile(this.#o.tls.cert);
  }

  #set(pair: ServingPair, why: string): void {
    this.#current = pair;
    const leaf = readCertificate(pair.cert);
    this.#o.logger.info(
      { why, fingerprint: leaf.fingerprint256, expires: leaf.validTo },
      'serving certificate replaced',
    );
    for (const fn of this.#listeners) fn(pair);
  }

  /** The pair kept in DATA_DIR/tls when it is the CA's, covers the names, and is not due; else a new one. */
  static #issued(o: ServingOptions, ca: CertificatePair, force = false): ServingPair {
    const dir = tlsDir(o.dataDir);
    const certFile = join(dir, 'server.pem');
    const keyFile = join(dir, 'server-key.pem');
    const names = servingNames(o.host, o.tls.san);
    const kept = force ? undefined : readIfThere(certFile);
    const key = force ? undefined : readIfThere(keyFile);
    if (kept !== undefined && key !== undefined && stillGood(kept, ca, names)) return { cert: kept, key };
    const made = issueCertificate(ca, {
      commonName: hostname(),
      ...names,
      usage: 'server',
      ...(o.lifetimeMs === undefined ? { days: 365 } : { lifetimeMs: o.lifetimeMs }),
    });
    const pair = { cert: made.cert + ca.cert, key: made.key };
    writeFileSync(keyFile, pair.key, { mode: 0o600 });
    writeFileSync(certFile, pair.cert, { mode: 0o644 });
    return pair;
  }

  #scheduleRenewal(): void {
    if (this.#stopped || this.ca === undefined) return;
    const ca = this.ca;
    const wait = Math.max(1000, renewalDue(this.#current.cert).getTime() - Date.now());
    this.#timer = setTimeout(
      () => {
        try {
          if (needsRenewal(this.#current.cert))
            this.#set(ServingCertificates.#issued(this.#o, ca, true), 'renewed before expiry');
        } catch (e) {
          this.#o.logger.error(
            { err: messageOf(e) },
            'could not renew the serving certificate; trying again in a minute',
          );
          this.#timer = setTimeout(() => this.#scheduleRenewal(), 60_000);
          this.#timer.unref();
          return;
        }
        this.#scheduleRenewal();
      },
      Math.min(wait, maxTimerMs),
    );
    this.#timer.unref();
  }

  #watchOwn(certFile: string, keyFile: string): void {
    const reread = (why: string) => {
      try {
        const next = readOwn(certFile, keyFile);
        if (next.cert !== this.#current.cert || next.key !== this.#current.key) this.#set(next, why);
      } catch (e) {
        // Mid-replacement (the certificate written, the key not yet): the next change or read fixes it.
        this.#o.logger.warn(
          { err: messageOf(e) },
          'tls.cert or tls.key could not be read again; keeping the one served',
        );
      }
    };
    fsWatch.watchFile(certFile, { interval: 5000, persistent: false }, () => reread('tls.cert changed'));
    const daily = () => {
      this.#timer = setTimeout(() => {
        reread('read again (daily)');
        daily();
      }, this.#o.rereadMs ?? dayMs);
      this.#timer.unref();
    };
    daily();
  }
}

function stillGood(pem: string, ca: CertificatePair, names: { dnsNames: string[]; ips: string[] }): boolean {
  try {
    const leaf = new X509Certificate(pem);
    const caCert = new X509Certificate(ca.cert);
    if (!leaf.verify(caCert.publicKey) || needsRenewal(pem)) return false;
    return (
      names.dnsNames.every((n) => leaf.checkHost(n) !== undefined) &&
      names.ips.every((ip) => leaf.checkIP(ip) !== undefined)
    );
  } catch {
    return false;
  }
}

function readOwn(certFile: string, keyFile: string): ServingPair {
  let cert: string;
  let key: string;
  try {
    cert = readFileSync(certFile, 'utf8');
    key = readFileSync(keyFile, 'utf8');
  } catch (e) {
    throw new LlmgwError(
      'invalid_argument',
      `cannot read tls.cert ${certFile} or tls.key ${keyFile}: ${messageOf(e)}`,
      { cause: e },
    );
  }
  const leaf = readCertificate(cert);
  if (Date.parse(leaf.validTo) < Date.now())
    throw new LlmgwError(
      'invalid_argument',
      `tls.cert ${certFile} expired on ${leaf.validTo}: replace it (llmgw reads it again when it changes)`,
    );
  return { cert, key };
}
