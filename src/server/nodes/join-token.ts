import { LlmgwError } from '../../core/errors.js';
import { hashSecret } from '../../core/secrets.js';
import type { JoinTokenRecord, Store } from '../../store/store.js';
import { splitJoinToken } from '../../tls/trust.js';

/** A join token, checked: live, not expired; else a refusal that says what to do. */
export async function checkJoinToken(
  store: Pick<Store, 'joinTokens'>,
  given: string,
  now: number,
): Promise<JoinTokenRecord> {
  // A token as printed may carry the CA's hash after a dot: that part is the agent's to check.
  const token = await store.joinTokens.findByHash(hashSecret(splitJoinToken(given).secret));
  if (token === undefined)
    throw new LlmgwError(
      'unauthenticated',
      'the join token is not valid: check it was copied whole, or make a new one with llmgw ctl node token',
    );
  if (token.revoked_at !== null)
    throw new LlmgwError(
      'unauthenticated',
      `the join token "${token.name}" was revoked at ${token.revoked_at}: make a new one with llmgw ctl node token`,
    );
  if (token.expires_at !== null && Date.parse(token.expires_at) <= now) {
    throw new LlmgwError(
      'unauthenticated',
      `the join token "${token.name}" expired at ${token.expires_at}: make a new one with llmgw ctl node token`,
    );
  }
  return token;
}
