import { loadSettings, SettingsError, type LoadedSettings, type LoadOptions } from '../config/load.js';

import { UsageError } from './usage-error.js';

/** The settings a command runs with; an invalid file is the operator's input, so a usage error (exit 2). */
export function commandSettings(options: LoadOptions): LoadedSettings {
  try {
    return loadSettings(options);
  } catch (e) {
    if (e instanceof SettingsError) throw new UsageError(e.message);
    throw e;
  }
}
