import { LlmgwError } from '../../core/errors.js';

/** A bound TCP socket that nothing listens on yet (Node's tcp_wrap TCP), as the cluster module shares one. */
export type TcpHandle = object & {
  getsockname(out: { port?: number }): number;
  close(): void;
};

/** Binds `address:port` (`addressType` 4 or 6) without listening: the handle, or a negative errno. */
export type CreateServerHandle = (address: string, port: number, addressType: number) => TcpHandle | number;

/**
 * How the primary binds the public address it hands to its workers, given the running Node's
 * `node:net` module: its internal `_createServerHandle` (the cluster module's own way; the same
 * `(address, port, addressType, fd, flags)` on Node 20, 22 and 24). Node 22.12+ also has
 * `listen({ reusePort: true })`, deliberately not used: see docs/gateway-workers.md. A Node
 * without the internal is refused with what to do, rather than failing deep in a worker's start.
 */
export function serverHandleFactory(net: object, nodeVersion: string): CreateServerHandle {
  const create: unknown = (net as { _createServerHandle?: unknown })._createServerHandle;
  if (typeof create === 'function') {
    return (address, port, addressType) =>
      (create as CreateServerHandle).call(net, address, port, addressType);
  }
  throw new LlmgwError(
    'not_implemented',
    `gateway workers need Node's net._createServerHandle, which Node ${nodeVersion} does not have: ` +
      'set gateway.workers: 0 (the gateway then serves in the primary process), or run Node 22 or 24',
  );
}
