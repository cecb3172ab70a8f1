import { STATUS_CODES } from 'node:http';

import { LlmgwError, messageOf } from '../../core/errors.js';

/** Why one try at a file failed, in a way another try may mend. */
export type Failure =
  | { kind: 'unreachable'; url: URL; cause: unknown }
  | { kind: 'status'; url: URL; status: number }
  | { kind: 'stalled'; ms: number }
  | { kind: 'broke'; received: number; cause: unknown }
  | { kind: 'short'; received: number; want: number };

/** An answer's head, as a refusal reads it. */
export interface AnswerHead {
  status: number;
  /** The address that answered (the last hop of redirects). */
  url: URL;
  header(name: string): string | null;
}

/**
 * How a download says what went wrong, in the words of whoever asked for the file: a model's
 * files name the hub and its token, an engine's archive the setting that points elsewhere.
 */
export interface Wording {
  /** One failed try. */
  failure(f: Failure): string;
  /** The error once no try is left: `said` is failure()'s words for the last, after `tries` tries. */
  gaveUp(said: string, tries: number, cause: Error): LlmgwError;
  /** A status no retry mends (404, 401, a 4xx other than 408 and 429). */
  refused(res: AnswerHead): LlmgwError;
}

/** A URL as messages show it: without its query, which on a CDN holds a signature. */
export function shownUrl(url: URL | string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

/** The status in words: "404 Not Found". */
function statusWords(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? ''}`.trim();
}

/** The words of a model file's download (the default): `name` is the file's path at its origin. */
export function fileWording(name: string): Wording {
  const cause = (e: unknown) => messageOf(e instanceof Error ? (e.cause ?? e) : e);
  return {
    failure: (f) => {
      switch (f.kind) {
        case 'unreachable':
          return `${name}: GET ${shownUrl(f.url)} failed: ${cause(f.cause)}`;
        case 'status':
          return `${name}: GET ${shownUrl(f.url)} answered ${statusWords(f.status)}`;
        case 'stalled':
          return `${name}: no byte for ${f.ms} ms`;
        case 'broke':
          return `${name}: the connection broke after ${f.received} bytes: ${cause(f.cause)}`;
        case 'short':
          return `${name}: the connection ended after ${f.received} of ${f.want} bytes`;
      }
    },
    gaveUp: (said, tries, e) =>
      new LlmgwError('unavailable', `${said}; gave up after ${tries} tries`, { cause: e }),
    refused: (res) => {
      // The hub explains some refusals in a header of its own.
      const said = res.header('x-error-message');
      const hint =
        res.status === 401 || res.status === 403
          ? 'check hub.token and that its account has access to the repository'
          : res.status === 404
            ? 'the file is gone from where the origin says it was: resolve the model again'
            : res.status === 416
              ? 'the file on the server is shorter than the origin says: resolve the model again'
              : undefined;
      return new LlmgwError(
        res.status === 404 ? 'not_found' : 'unavailable',
        `${name}: GET ${shownUrl(res.url)} answered ${statusWords(res.status)}${said === null ? '' : ` (${said})`}${hint === undefined ? '' : `: ${hint}`}`,
      );
    },
  };
}
