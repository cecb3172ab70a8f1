import { envKeys } from './env.js';
import { parseSettings, SettingsError, type LoadedSettings, type LoadOptions } from './load.js';
import { settingsSchema } from './schema.js';

/**
 * Validates settings text that is about to be written (PUT /api/v1/config, `llmgw ctl config
 * edit`) in two readings: as this process runs it, with the LLMGW_ variables of its environment
 * over the file, and as the file it will be, read by a start without them (they may be gone at
 * the next start, and the file must hold on its own). Where only one reading is refused, the
 * refusal says which; where both are, the problems are the file's and it says nothing more.
 */
export function parseWrittenSettings(
  text: string,
  options: LoadOptions & { path: string; exists?: boolean },
): LoadedSettings {
  const env = options.env ?? process.env;
  const overriding = envKeys(settingsSchema)
    .map((k) => k.variable)
    .filter((v) => env[v] !== undefined && env[v] !== '');
  if (overriding.length === 0) return parseSettings(text, options);
  const named = overriding.join(', ');
  const without = Object.fromEntries(Object.entries(env).filter(([name]) => !overriding.includes(name)));
  const alone = attempt(() => parseSettings(text, { ...options, env: without }));
  const now = attempt(() => parseSettings(text, options));
  if (now instanceof SettingsError) {
    if (alone instanceof SettingsError) throw now;
    throw new SettingsError(
      now.file,
      now.issues,
      `as this control plane runs it, with ${named} from its environment`,
    );
  }
  if (alone instanceof SettingsError)
    throw new SettingsError(
      alone.file,
      alone.issues,
      `the file on its own, as a start without ${named} reads it`,
    );
  return now;
}

function attempt(parse: () => LoadedSettings): LoadedSettings | SettingsError {
  try {
    return parse();
  } catch (e) {
    if (e instanceof SettingsError) return e;
    throw e;
  }
}
