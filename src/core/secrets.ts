import { createHash, randomBytes } from 'node:crypto';

/**
 * Secrets llmgw hands out: API keys (`llmgw_key_...`) and join tokens
 * (`llmgw_join_...`). The prefix lets secret scanners and people recognise them, and
 * lets logs redact them (core/redact.ts).
 *
 * They are stored as SHA-256 hashes. A password needs a slow hash because people pick
 * guessable ones; these are 192 random bits, so a fast hash is as safe and lets every
 * request be checked by one indexed lookup.
 */
export type SecretKind = 'key' | 'join' | 'node' | 'engine';

const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function generateSecret(kind: SecretKind): string {
  const bytes = randomBytes(32);
  let body = '';
  // 32 base62 characters: about 190 bits. The modulo bias of 256 % 62 is irrelevant at this length.
  for (let i = 0; i < 32; i++) body += alphabet.charAt((bytes[i] ?? 0) % alphabet.length);
  return `llmgw_${kind}_${body}`;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Enough of a secret to tell it apart in a list, too little to use. */
export function secretPrefix(secret: string): string {
  const m = /^(llmgw_[a-z]+_)(.{4})/.exec(secret);
  return m === null ? `${secret.slice(0, 4)}...` : `${m[1] ?? ''}${m[2] ?? ''}...`;
}
