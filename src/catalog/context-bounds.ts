import { z } from 'zod';

/**
 * The contexts llmgw takes, in tokens: one bound wherever a context is written (a model's
 * context_length, `llmgw ctl model context`, a plan's context), with one message, so that
 * what one place accepts another never refuses.
 */
export const MIN_CONTEXT = 256;
/** 16,777,216: past every model's trained context, and what the planner's arithmetic is sized for. */
export const MAX_CONTEXT = 2 ** 24;

/** Why `tokens` is no context llmgw takes; undefined when it is one. */
export function contextProblem(tokens: unknown): string | undefined {
  if (
    typeof tokens === 'number' &&
    Number.isInteger(tokens) &&
    tokens >= MIN_CONTEXT &&
    tokens <= MAX_CONTEXT
  )
    return undefined;
  return contextRefusal(tokens);
}

/** The one message of a context out of bounds. */
export function contextRefusal(given: unknown): string {
  return `a context is a whole number of tokens from ${MIN_CONTEXT} to ${MAX_CONTEXT}, not ${shown(given)}`;
}

/** A context as a schema field (context_length, a plan's context): the bound and its message. */
export function contextSchema(): z.ZodInt {
  const error = (issue: { input?: unknown }) => contextRefusal(issue.input);
  return z.int({ error }).min(MIN_CONTEXT, { error }).max(MAX_CONTEXT, { error });
}

/** What the caller gave, short: a context is read back in a message, and anyone may send a megabyte. */
function shown(given: unknown): string {
  if (typeof given === 'string')
    return JSON.stringify(given.length > 40 ? `${given.slice(0, 37)}...` : given);
  if (typeof given === 'number' || typeof given === 'boolean' || given === null) return String(given);
  return Array.isArray(given) ? 'a list' : typeof given;
}
