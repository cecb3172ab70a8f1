import type { TlsMaterial } from '../../src/agent/engine-proxy.js';
import { createCa, issueCertificate } from '../../src/tls/certificates.js';

/** A CA of its own and a certificate it issued for 127.0.0.1 (and `node-1`): what a node's agent is given. */
export function nodeTlsMaterial(caName = 'test cluster'): TlsMaterial {
  const ca = createCa({ commonName: `${caName} CA`, days: 2 });
  const node = issueCertificate(ca, {
    commonName: 'node-1',
    ips: ['127.0.0.1'],
    dnsNames: ['node-1'],
    days: 2,
    usage: 'server',
  });
  return { cert: node.cert, key: node.key, ca: ca.cert };
}
