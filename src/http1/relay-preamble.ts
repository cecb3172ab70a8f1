import type { Socket } from 'node:net';

/**
 * The line a gateway worker writes before the bytes of a connection it relays to its
 * primary (the control plane): who the client is, and whether it came over TLS, which the
 * primary cannot see on its internal socket. Only the internal listener (a unix socket of
 * mode 0600) reads it: the public address never does.
 */
export interface RelayedClient {
  address: string;
  /** The client spoke TLS to the worker (which terminated it). */
  tls: boolean;
}

const magic = 'LLMGW-RELAY/1';
/** A preamble is one short line: an address is at most 45 characters (IPv6 with IPv4). */
const maxPreambleBytes = 128;

export function formatPreamble(c: RelayedClient): string {
  return `${magic} ${c.address} ${c.tls ? 'tls' : 'plain'}\n`;
}

/** The client named by a preamble line (without its newline), or undefined when it is not one. */
export function parsePreamble(line: string): RelayedClient | undefined {
  const parts = line.split(' ');
  if (parts.length !== 3 || parts[0] !== magic) return undefined;
  const [, address, tls] = parts as [string, string, string];
  if (address === '' || !/^[0-9a-fA-F:.]+$/.test(address) || (tls !== 'tls' && tls !== 'plain'))
    return undefined;
  return { address, tls: tls === 'tls' };
}

/**
 * Reads a relayed connection's preamble, then hands the socket on as if it came from the
 * client: its remoteAddress is the client's (audit, per-client bounds), and what followed
 * the preamble in the same read is put back. A connection without a valid preamble is closed.
 */
export function acceptRelayed(socket: Socket, then: (socket: Socket, client: RelayedClient) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const onData = (d: Buffer) => {
    seen = seen.length === 0 ? d : Buffer.concat([seen, d]);
    const nl = seen.indexOf(10);
    if (nl < 0) {
      if (seen.length > maxPreambleBytes) socket.destroy();
      return;
    }
    socket.off('data', onData);
    socket.pause();
    const client = nl <= maxPreambleBytes ? parsePreamble(seen.toString('latin1', 0, nl)) : undefined;
    if (client === undefined) {
      socket.destroy();
      return;
    }
    const rest = seen.subarray(nl + 1);
    if (rest.length > 0) socket.unshift(rest);
    // A unix socket has no address: the client's stands in for it, as a proxy's PROXY line does.
    Object.defineProperty(socket, 'remoteAddress', { value: client.address, configurable: true });
    if (client.tls) Object.defineProperty(socket, 'encrypted', { value: true, configurable: true });
    then(socket, client);
    socket.resume();
  };
  socket.on('data', onData);
  socket.on('error', () => socket.destroy());
}
