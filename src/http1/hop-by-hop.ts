/**
 * Headers of one connection, not of the message (RFC 9110, 7.6.1): each side of a proxy sets
 * its own, so none is passed from one connection to the other.
 */
export const hopByHop: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
