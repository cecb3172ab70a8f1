import {
  diffSettings,
  hideSecrets,
  parseWrittenSettings,
  removeTempCopies,
  restoreSecrets,
  withoutSecrets,
  writeFileAtomic,
  type LoadedSettings,
  type LoadOptions,
} from '../../config/index.js';
import { diffJson } from '../../core/diff.js';
import { LlmgwError } from '../../core/errors.js';
import type { ConfigChangeView } from '../../core/api-types.js';
import type { Store } from '../../store/store.js';
import { createHash } from 'node:crypto';

export type SettingsListener = (next: LoadedSettings, previous: LoadedSettings) => void;

export interface SettingsHolderOptions {
  initial: LoadedSettings;
  store: Store;
  /** What the file was loaded with (environment, working directory), applied to new text too. */
  loadOptions: LoadOptions;
  /**
   * Checks new settings beyond their text before they are written (that declared models'
   * sources resolve); throws to refuse them.
   */
  vet?: (next: LoadedSettings, before: LoadedSettings) => Promise<void>;
}

/**
 * The settings in effect, and their replacement through the API: the new text is
 * validated as a whole first, written atomically, then applied; a refusal changes
 * nothing, on disk or in memory.
 */
export class SettingsHolder {
  #current: LoadedSettings;
  readonly #store: Store;
  readonly #loadOptions: LoadOptions;
  readonly #vet: SettingsHolderOptions['vet'];
  readonly #listeners: SettingsListener[] = [];
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: SettingsHolderOptions) {
    this.#current = options.initial;
    this.#store = options.store;
    this.#loadOptions = options.loadOptions;
    this.#vet = options.vet;
    // A control plane killed mid-write left a temporary copy beside the file (with its secrets).
    if (options.initial.source.exists) removeTempCopies(options.initial.source.path);
  }

  get current(): LoadedSettings {
    return this.#current;
  }

  /** The file's text as the API shows it: secrets (hub.token) behind a placeholder. */
  get shownText(): string {
    return hideSecrets(this.#current.source.text);
  }

  /** A tag of the file's text, for If-Match on a replacement. */
  get etag(): string {
    return etagOf(this.#current.source.text);
  }

  onChange(listener: SettingsListener): void {
    this.#listeners.push(listener);
  }

  /**
   * Replaces the settings file; one replacement at a time. A secret left as the placeholder of
   * `shownText` keeps the value the file holds.
   */
  replace(text: string, actor: string, ifMatch?: string): Promise<ConfigChangeView> {
    const run = this.#queue.then(() => this.#replace(text, actor, ifMatch));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #replace(given: string, actor: string, ifMatch?: string): Promise<ConfigChangeView> {
    const before = this.#current;
    if (ifMatch !== undefined && ifMatch !== '*' && ifMatch !== this.etag) {
      throw new LlmgwError(
        'precondition_failed',
        'the settings file changed since you read it: read it again (llmgw ctl config edit) and redo your change',
      );
    }
    const text = restoreSecrets(given, before.source.text);
    const next = parseWrittenSettings(text, { ...this.#loadOptions, path: before.source.path, exists: true });
    const envKeys = [...next.source.fromEnv];
    if (text === before.source.text)
      return { changed: false, applied: [], restart_required: [], overridden_by_env: envKeys };

    const stored = new Set((await this.#store.models.list()).map((m) => m.spec.name));
    const clash = next.settings.models.filter((m) => stored.has(m.name)).map((m) => m.name);
    if (clash.length > 0) {
      throw new LlmgwError(
        'conflict',
        `the settings declare ${clash.map((n) => `"${n}"`).join(', ')}, already added through the API: remove ${clash.length === 1 ? 'it' : 'them'} there first (llmgw ctl model rm NAME), or declare another name`,
      );
    }

    await this.#vet?.(next, before);

    const change = diffSettings(before.settings, next.settings);
    await this.#store.transaction(async (tx) => {
      await tx.audit.record({
        actor,
        action: 'config.update',
        target: `config/${before.source.path}`,
        detail: {
          changes: diffJson(withoutSecrets(before.settings), withoutSecrets(next.settings)),
          restart_required: change.restartRequired,
        },
      });
      // Written inside the transaction: a failed write rolls the audit entry back with it.
      writeFileAtomic(before.source.path, text);
    });
    this.#current = next;
    for (const listener of this.#listeners) listener(next, before);
    return {
      changed: true,
      applied: change.applied,
      restart_required: change.restartRequired,
      overridden_by_env: envKeys,
    };
  }
}

export function etagOf(text: string): string {
  return `"${createHash('sha256').update(text).digest('hex').slice(0, 16)}"`;
}
