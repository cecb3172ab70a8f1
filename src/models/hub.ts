/**
 * Which hub to ask, and with which token: the settings `hub.endpoint` and `hub.token`, else the
 * environment's HF_ENDPOINT and HF_TOKEN (as huggingface_hub reads them), else the public hub.
 */
import { LlmgwError } from '../core/errors.js';

export const defaultHubEndpoint = 'https://huggingface.co';

export interface HubAccess {
  endpoint: string;
  token?: string;
}

/** The hub's address and token; refuses an endpoint that is not an http(s) address. */
export function hubAccess(
  settings: { endpoint?: string | undefined; token?: string | undefined },
  env: Record<string, string | undefined>,
): HubAccess {
  const pick = (...values: (string | undefined)[]) =>
    values.map((v) => v?.trim()).find((v) => v !== undefined && v !== '');
  const fromSetting = pick(settings.endpoint);
  const endpoint = fromSetting ?? pick(env['HF_ENDPOINT']) ?? defaultHubEndpoint;
  const where = fromSetting === undefined ? 'HF_ENDPOINT' : 'hub.endpoint';
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new LlmgwError(
      'invalid_argument',
      `${where} "${endpoint}" is not an address: write one like ${defaultHubEndpoint}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new LlmgwError(
      'invalid_argument',
      `${where} "${endpoint}" is not an http(s) address: write one like ${defaultHubEndpoint}`,
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw new LlmgwError(
      'invalid_argument',
      `${where} carries a user name or password: put the token in hub.token instead`,
    );
  }
  const token = pick(settings.token, env['HF_TOKEN']);
  return token === undefined
    ? { endpoint: endpoint.replace(/\/+$/, '') }
    : { endpoint: endpoint.replace(/\/+$/, ''), token };
}
