import { LlmgwError } from '../core/errors.js';

/** `127.0.0.1:8080`, `:8080` or `[::1]:8080` as host and port; an empty host is every interface. */
export function parseListen(listen: string): { host: string | undefined; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]*)):(\d{1,5})$/.exec(listen);
  const port = Number(m?.[3]);
  if (m === null || !(port >= 0 && port <= 65535)) {
    throw new LlmgwError(
      'invalid_argument',
      `listen "${listen}" is not HOST:PORT: write e.g. 127.0.0.1:8080`,
    );
  }
  const host = m[1] ?? m[2];
  return { host: host === '' ? undefined : host, port };
}

/** The URL a client on this machine reaches a listening address at. */
export function localUrl(host: string | undefined, port: number, scheme: 'http' | 'https' = 'http'): string {
  const h = host === undefined || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `${scheme}://${h.includes(':') ? `[${h}]` : h}:${port}`;
}
