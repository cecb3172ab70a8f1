/**
 * Whether an error says the database could not be reached or dropped the connection (a
 * PostgreSQL restart or failover, a network cut), rather than refusing what was asked:
 * the API answers it 503, so clients and gateways try again or ask another control plane.
 */
export function storeUnreachable(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (connectionCodes.has(code) || code.startsWith('08'))) return true;
    if (
      /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(
        e.message,
      )
    )
      return true;
  }
  return false;
}

/** Socket errors, and PostgreSQL's class 57P (the server shutting down or not accepting connections yet). */
const connectionCodes = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  '57P01',
  '57P02',
  '57P03',
]);
