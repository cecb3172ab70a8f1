/**
 * The token of an `Authorization: Bearer TOKEN` header (RFC 6750, 2.1): the scheme in any
 * case, then one token. Undefined when the header is absent, empty, or of another scheme.
 * The one reader of bearer tokens: API keys, join tokens and node credentials all come this way.
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)?.[1];
}
