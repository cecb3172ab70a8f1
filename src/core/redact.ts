/**
 * Secrets must never reach a log line or an error message. These patterns cover what
 * llmgw hands out (API keys, join tokens) and what it is given (database URLs).
 */
const secretPatterns: readonly [RegExp, string][] = [
  [/\b(llmgw_[a-z]+_)[A-Za-z0-9_-]{8,}/g, '$1[redacted]'],
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
