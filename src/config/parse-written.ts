import { envKeys } from './env.js';
import { parseSettings, SettingsError, type LoadedSettings, type LoadOptions } from './load.js';
import { settingsSchema } from './schema.js';

/**
 * Validates settings text that is about to be written (PUT /api/v1/config, `llmgw ctl config
 * edit`) twice: as this process runs it, with the LLMGW_ variables of its environment over the
 * file; then as the file it will be, read by a start without those variables (they may be gone
 * at the next start, and the file must hold on its own). A refusal of the second reading says
 * so; in the first, a value from the environment already names its variable.
 */
export function parseWrittenSettings(
  text: string,
  options: LoadOptions & { path: string; exists?: boolean },
): LoadedSettings {
  const env = options.env ?? process.env;
  const loaded = parseSettings(text, options);
  const overriding = envKeys(settingsSchema)
    .map((k) => k.variable)
    .filter((v) => env[v] !== undefined && env[v] !== '');
  if (overriding.length === 0) return loaded;
  const without = Object.fromEntries(Object.entries(env).filter(([name]) => !overriding.includes(name)));
  try {
    parseSettings(text, { ...options, env: without });
  } catch (e) {
    if (!(e instanceof SettingsError)) throw e;
    const reading = `the file on its own, as a start without ${overriding.join(', ')} reads it`;
    throw new SettingsError(e.file, e.issues, reading);
  }
  return loaded;
}
