import { LlmgwError } from '../../core/errors.js';
import { httpGet } from '../http-get.js';

import { shownUrl, type AnswerHead } from './wording.js';

const maxRedirects = 10;

/** One HTTP answer, whichever client fetched it. */
export interface Answer extends AnswerHead {
  /** Passes each body chunk to `take` until the body ends; a promise `take` returns pauses the body until it settles. */
  pump(take: (chunk: Uint8Array) => Promise<void> | undefined): Promise<void>;
  /** Leaves the body unread. */
  drop(): Promise<void>;
}

export interface GetOptions {
  url: string;
  /** Sent to url's own origin only. */
  headers: Record<string, string> | undefined;
  range: string | undefined;
  signal: AbortSignal;
  fetch: typeof fetch | undefined;
}

/** A GET that no answer came to: the network's error, as the client gave it. */
export class Unanswered extends Error {
  readonly url: URL;
  constructor(url: URL, cause: unknown) {
    super(`GET ${url.origin} failed`, { cause });
    this.url = url;
  }
}

/**
 * GETs a URL following redirects by hand, so the caller's headers stay with the URL's own origin.
 * Throws Unanswered when the network fails, the signal's reason when it was aborted.
 */
export async function get(o: GetOptions, name: string): Promise<Answer> {
  let url = new URL(o.url);
  const home = url.origin;
  let left = false;
  for (let hop = 0; hop <= maxRedirects; hop++) {
    left ||= url.origin !== home;
    const headers: Record<string, string> = {
      ...(left ? {} : o.headers),
      // A compressed body would not match byte ranges or sizes.
      'accept-encoding': 'identity',
    };
    if (o.range !== undefined) headers['range'] = o.range;
    let res: Answer;
    try {
      res =
        o.fetch === undefined
          ? await viaSocket(url, { headers, signal: o.signal })
          : await viaFetch(o.fetch, url, { headers, signal: o.signal });
    } catch (e) {
      if (o.signal.aborted) throw o.signal.reason;
      if (e instanceof LlmgwError) throw e;
      throw new Unanswered(url, e);
    }
    const location = res.header('location');
    if (res.status >= 300 && res.status < 400 && location !== null) {
      await res.drop();
      url = new URL(location, url);
      continue;
    }
    return res;
  }
  throw new LlmgwError(
    'unavailable',
    `${name}: GET ${shownUrl(o.url)} redirected more than ${maxRedirects} times`,
  );
}

/** An injected fetch (tests, proxies): the body read through its web stream. */
async function viaFetch(
  fetchImpl: typeof fetch,
  url: URL,
  init: { headers: Record<string, string>; signal: AbortSignal },
): Promise<Answer> {
  const res = await fetchImpl(url, { ...init, redirect: 'manual' });
  return {
    status: res.status,
    url,
    header: (name) => res.headers.get(name),
    pump: async (take) => {
      if (res.body === null) return;
      const reader = res.body.getReader();
      for (;;) {
        const r = await reader.read();
        if (r.done) return;
        const wait = take(r.value as Uint8Array);
        if (wait !== undefined) await wait;
      }
    },
    drop: () => res.body?.cancel().catch(() => undefined) ?? Promise.resolve(),
  };
}

/** The default client: one GET per connection, the body as the socket's own buffers (see http-get.ts). */
async function viaSocket(
  url: URL,
  init: { headers: Record<string, string>; signal: AbortSignal },
): Promise<Answer> {
  return { ...(await httpGet(url, init)), url };
}
