import { randomUUID } from 'node:crypto';

/** What a client may send as `X-Request-Id`: it is logged and passed to engines, so it is held to a short, plain token. */
const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's request id when it is one we pass on, else undefined. */
export function validRequestId(id: unknown): string | undefined {
  return typeof id === 'string' && requestIdPattern.test(id) ? id : undefined;
}

/** The client's request id, or a new one when it sent none (or one we do not pass on). */
export function requestIdFrom(id: unknown): string {
  return validRequestId(id) ?? randomUUID();
}
