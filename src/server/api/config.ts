import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';

import { settingsMaxBytes, settingsSizeMessage } from '../../config/settings-size.js';

import { LlmgwError } from '../../core/errors.js';
import type { SettingsHolder } from '../state/settings-holder.js';
import { adminOnly, principalOf, type ApiEnv } from './context.js';

export interface ConfigRouteDeps {
  settings: Pick<SettingsHolder, 'current' | 'etag' | 'shownText' | 'replace'>;
}

/**
 * The settings file as text: read it (hub.token hidden), or replace it whole (validated first,
 * written atomically).
 */
export function configRoutes(deps: ConfigRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', adminOnly);

  app.get('/', (c) => {
    const { source } = deps.settings.current;
    c.header('ETag', deps.settings.etag);
    c.header('X-Llmgw-Config-Path', source.path);
    if (source.fromEnv.length > 0) c.header('X-Llmgw-Overridden-By-Env', source.fromEnv.join(','));
    return c.body(deps.settings.shownText, 200, { 'Content-Type': 'application/yaml; charset=utf-8' });
  });

  // Tighter than the API's 1 MiB: the body is read whole and parsed as YAML.
  const bounded = bodyLimit({
    maxSize: settingsMaxBytes,
    onError: () => {
      throw new LlmgwError('payload_too_large', `the settings file was not changed: ${settingsSizeMessage}`);
    },
  });
  app.put('/', bounded, async (c) => {
    const type = c.req.header('content-type') ?? '';
    if (!/^(application\/(x-)?yaml|text\/(x-)?yaml|text\/plain)\b/i.test(type)) {
      throw new LlmgwError(
        'unsupported_media_type',
        `send the settings file as text with "Content-Type: application/yaml" (got "${type || 'none'}")`,
      );
    }
    const text = await c.req.text();
    const change = await deps.settings.replace(text, principalOf(c).name, c.req.header('if-match'));
    c.header('ETag', deps.settings.etag);
    return c.json(change);
  });

  return app;
}
