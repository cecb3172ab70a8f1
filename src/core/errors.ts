/**
 * One error class for everything llmgw refuses or fails at, with a stable machine
 * code. The HTTP status of each code lives here, so the wire mapping is in one place.
 */
export const errorStatus = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  conflict: 409,
  read_only: 409,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  rate_limited: 429,
  internal: 500,
  not_implemented: 501,
  /** An upstream (the hub, for the mirror) failed or answered in error. */
  bad_gateway: 502,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

/** A problem at a place in a document: `profiles[0].tp`, line 12. */
export interface Issue {
  path: readonly (string | number)[];
  message: string;
  line?: number;
}

export interface LlmgwErrorOptions {
  /** What to do about it, when the message alone does not say. */
  hint?: string;
  cause?: unknown;
  /** Every problem found, for a refusal that found more than one. */
  issues?: readonly Issue[];
}

export class LlmgwError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  readonly issues: readonly Issue[];

  constructor(code: ErrorCode, message: string, options: LlmgwErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LlmgwError';
    this.code = code;
    this.hint = options.hint;
    this.issues = options.issues ?? [];
  }

  get status(): number {
    return errorStatus[this.code];
  }
}

export function isLlmgwError(e: unknown): e is LlmgwError {
  return e instanceof LlmgwError;
}

/** The message of anything thrown, for logs and wrapping. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

/** Formats a document path the way a person writes it: `models[0].profiles[1].tp`. */
export function formatPath(path: readonly (string | number)[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? part : `.${part}`;
  }
  return out;
}

/** One line per issue, prefixed by its path. */
export function formatIssues(issues: readonly Issue[]): string {
  return issues
    .map((i) => (i.path.length > 0 ? `${formatPath(i.path)}: ${i.message}` : i.message))
    .join('\n');
}
