/**
 * Secrets must never reach a log line or an error message. These patterns cover what
 * llmgw hands out (API keys, join tokens) and what it is given (database URLs).
 */
const secretPatterns: readonly [RegExp, string][] = [
  // No word boundary before the prefix: a key glued to other text (`x_llmgw_key_...`) is still a key.
  [/(llmgw_[a-z]+_)[A-Za-z0-9_-]{8,}/g, '$1[redacted]'],
  [/\b(Bearer\s+)[A-Za-z0-9._~+/=-]{12,}/gi, '$1[redacted]'],
  [/(\/\/[^/:@\s]+:)[^@/\s]+@/g, '$1[redacted]@'],
];

export function redact(text: string): string {
  let out = text;
  for (const [pattern, replacement] of secretPatterns) out = out.replace(pattern, replacement);
  return out;
}

/** A URL with its password replaced, for logs: `postgres://u:[redacted]@h/db`. */
export function redactUrl(url: string): string {
  return redact(url);
}

/** Longest client value a log line or message repeats (a model name, a path). */
export const clientTextMax = 200;

/**
 * A value a client sent, as a log line or an error message may repeat it: cut to `max`
 * characters (saying how much was left out) and with secrets redacted. Anyone can send
 * anything, a megabyte or someone's key, and logs must stay small and free of secrets.
 */
export function clientText(value: string, max = clientTextMax): string {
  // Redacted with some text past the cut, so a key that straddles it is still recognised.
  const head = redact(value.length > max + 64 ? value.slice(0, max + 64) : value);
  if (value.length <= max + 64 && head.length <= max) return head;
  return `${head.slice(0, max)}…(${value.length} characters)`;
}
