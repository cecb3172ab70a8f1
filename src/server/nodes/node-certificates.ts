import { isIP } from 'node:net';

import type { CertificatePair } from '../../tls/certificates.js';
import { issueCertificate } from '../../tls/certificates.js';

import type { NodeTls } from './agent-hub.js';

/**
 * Certificates of the nodes' engine forwarders, issued by the cluster CA for the address
 * gateways dial (the node's reported address, else the one it connected from). Issued at
 * every welcome: a node that reconnects gets a fresh one, so none runs out while in use
 * unless its agent stays connected for the whole lifetime.
 */
export function nodeCertificates(ca: CertificatePair, lifetimeDays = 365): NodeTls {
  return (node, address) => {
    const host = address.replace(/^::ffff:/, '').replace(/^\[(.*)\]$/, '$1');
    const pair = issueCertificate(ca, {
      commonName: node,
      ...(isIP(host) === 0 ? { dnsNames: [host, node] } : { ips: [host], dnsNames: [node] }),
      days: lifetimeDays,
      usage: 'server',
    });
    return { cert: pair.cert, key: pair.key, ca: ca.cert };
  };
}
