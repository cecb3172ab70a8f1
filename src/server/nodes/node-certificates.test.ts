import { X509Certificate } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { createCa } from '../../tls/certificates.js';

import { nodeCertificates } from './node-certificates.js';

describe("the nodes' forwarder certificates", () => {
  const ca = createCa({ commonName: 'test cluster' });
  const issue = nodeCertificates(ca);

  it.each([
    ['10.0.0.7', '10.0.0.7'],
    ['::ffff:10.0.0.8', '10.0.0.8'],
    ['[fd00::5]', 'fd00::5'],
  ])('covers the IP gateways dial (%s) and the node name, signed by the cluster CA', (address, ip) => {
    const tls = issue('gpu-1', address);
    const cert = new X509Certificate(tls.cert);
    expect(cert.checkIssued(new X509Certificate(ca.cert))).toBe(true);
    expect(cert.verify(new X509Certificate(ca.cert).publicKey)).toBe(true);
    expect(cert.checkIP(ip)).toBe(ip);
    expect(cert.checkHost('gpu-1')).toBe('gpu-1');
    expect(tls.ca).toBe(ca.cert);
    expect(tls.key).toContain('PRIVATE KEY');
  });

  it('covers a host name the node reports as its address', () => {
    const cert = new X509Certificate(issue('gpu-2', 'gpu-2.lab.example').cert);
    expect(cert.checkHost('gpu-2.lab.example')).toBe('gpu-2.lab.example');
    expect(cert.checkIP('10.0.0.7')).toBeUndefined();
  });
});
