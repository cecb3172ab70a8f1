/**
 * The few DER encodings a certificate needs (X.690): enough to write X.509 v3 certificates
 * with Node's own keys and signatures. Reading is left to node:crypto's X509Certificate.
 */

function lengthBytes(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One tag-length-value. */
export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), lengthBytes(body.length), body]);
}

export const sequence = (...items: Buffer[]): Buffer => tlv(0x30, ...items);
export const set = (...items: Buffer[]): Buffer => tlv(0x31, ...items);
export const octetString = (b: Buffer): Buffer => tlv(0x04, b);
export const utf8String = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
export const boolean = (v: boolean): Buffer => tlv(0x01, Buffer.from([v ? 0xff : 0]));
/** A BIT STRING of whole bytes (no unused bits). */
export const bitString = (b: Buffer): Buffer => tlv(0x03, Buffer.from([0]), b);
/** [n] EXPLICIT, constructed. */
export const explicit = (n: number, inner: Buffer): Buffer => tlv(0xa0 | n, inner);
/** [n] IMPLICIT of a primitive (a GeneralName's dNSName, iPAddress). */
export const implicitPrimitive = (n: number, content: Buffer): Buffer => tlv(0x80 | n, content);

/** A non-negative INTEGER from its big-endian bytes (a serial number). */
export function unsignedInteger(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const trimmed = bytes.subarray(start);
  // A leading 1 bit would read as negative.
  return tlv(0x02, (trimmed[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

export const smallInteger = (n: number): Buffer => unsignedInteger(Buffer.from([n]));

export function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const [a = 0, b = 0, ...rest] = parts;
  const bytes: number[] = [40 * a + b];
  for (const p of rest) {
    const chunk: number[] = [];
    let v = p;
    do {
      chunk.unshift(v & 0x7f);
      v = Math.floor(v / 128);
    } while (v > 0);
    for (let i = 0; i < chunk.length - 1; i++) chunk[i] = (chunk[i] ?? 0) | 0x80;
    bytes.push(...chunk);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280, 4.1.2.5), to the second. */
export function time(d: Date): Buffer {
  const iso = d.toISOString(); // 2026-12-03T15:24:17.000Z
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return d.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(digits.slice(2), 'latin1'))
    : tlv(0x18, Buffer.from(digits, 'latin1'));
}
