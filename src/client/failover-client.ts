import { isLlmgwError } from '../core/errors.js';

import type { ApiClient, ApiResponse, RequestOptions } from './api-client.js';

/** What a part needs of the API: requests (the gateway's keys, routes and usage). */
export type Requester = Pick<ApiClient, 'request'>;

/**
 * Requests to several control planes of one cluster: each goes to the one that answered
 * last, and on to the next when that one cannot be reached (or says it is unavailable),
 * so a process that follows the cluster (`llmgw gateway`) outlives any one of them.
 */
export class FailoverClient implements Requester {
  readonly #clients: readonly Requester[];
  #current = 0;

  constructor(clients: readonly Requester[]) {
    if (clients.length === 0) throw new Error('no control plane to ask');
    this.#clients = clients;
  }

  async request<T>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>> {
    let last: unknown;
    for (let i = 0; i < this.#clients.length; i++) {
      const at = (this.#current + i) % this.#clients.length;
      const client = this.#clients[at];
      if (client === undefined) continue;
      try {
        const answer = await client.request<T>(method, path, options);
        this.#current = at;
        return answer;
      } catch (e) {
        if (!isLlmgwError(e) || e.code !== 'unavailable') throw e;
        last = e;
      }
    }
    throw last;
  }
}

/** `URL1,URL2`: the control planes' addresses, each checked; the message names a bad one. */
export function serverList(text: string, flag = '--server'): string[] | string {
  const list = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 0) return `${flag} is empty: write http://HOST:8080 (several: URL1,URL2)`;
  for (const s of list)
    if (!/^https?:\/\/[^\s/]+/.test(s))
      return `${flag} ${s} is not a URL: write http://HOST:8080 or https://HOST:8080 (several: URL1,URL2)`;
  return list;
}
