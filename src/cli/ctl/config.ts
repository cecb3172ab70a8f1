import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { Command } from 'commander';

import { ApiError, type ApiClient } from '../../client/api-client.js';
import type { ConfigChangeView } from '../../core/api-types.js';
import { hiddenSecret } from '../../config/secret-text.js';
import { LlmgwError } from '../../core/errors.js';
import { type Runner } from '../command.js';
import { emit, type Output } from '../output.js';

import { connect } from './connection.js';

export function registerConfig(ctl: Command, run: Runner): void {
  const config = ctl.command('config').description("show or edit the control plane's settings file");
  config
    .command('show')
    .description('print the settings file')
    .action(
      run.action(async ({ o, conn }) => {
        const c = await connect(conn).getConfig();
        emit(
          o,
          { path: c.path, text: c.text, overridden_by_env: c.overriddenByEnv },
          (d) => d.text || `# ${d.path} is empty: every setting has its default`,
        );
        if (!o.json && c.overriddenByEnv.length > 0)
          o.err(`note: set from the environment, winning over the file: ${c.overriddenByEnv.join(', ')}`);
      }),
    );
  config
    .command('edit')
    .description(
      'edit the settings file in $EDITOR; it is validated before it is written, and reopened on an error',
    )
    .action(
      run.action(async ({ o, conn }) => {
        await editSettings(connect(conn), o, process.env);
      }),
    );
}

const marker = '# llmgw: ';
/** Refusals the person can fix in the editor. */
const reopenOn = new Set<string>(['invalid_argument', 'conflict', 'payload_too_large']);

/** Like kubectl edit: open, validate on save, reopen with the error on top, until valid or unchanged. */
export async function editSettings(client: ApiClient, o: Output, env: NodeJS.ProcessEnv): Promise<void> {
  const current = await client.getConfig();
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-edit-'));
  const file = join(dir, 'config.yaml');
  let text = current.text;
  let error: string | undefined;
  let lastRefused: string | undefined;
  for (;;) {
    writeFileSync(file, header(current.path, error, text.includes(hiddenSecret)) + text, { mode: 0o600 });
    runEditor(env, file);
    const edited = stripHeader(readFileSync(file, 'utf8'));
    if (edited === current.text) {
      rmSync(dir, { recursive: true, force: true });
      emit<ConfigChangeView>(
        o,
        { changed: false, applied: [], restart_required: [], overridden_by_env: current.overriddenByEnv },
        () => 'Edit cancelled: no changes made.',
      );
      return;
    }
    if (edited === lastRefused) {
      throw new LlmgwError(
        'invalid_argument',
        `edit cancelled: the settings still have the error shown; your changes are kept in ${file}\n${error ?? ''}`,
      );
    }
    try {
      const change = await client.putConfig(edited, current.etag);
      rmSync(dir, { recursive: true, force: true });
      emit(o, change, describeChange);
      return;
    } catch (e) {
      if (!(e instanceof ApiError) || !reopenOn.has(e.code)) {
        if (e instanceof LlmgwError)
          throw new LlmgwError(e.code, `${e.message}\nyour changes are kept in ${file}`);
        throw e;
      }
      error = e.message;
      text = edited;
      lastRefused = edited;
      o.err(`error: ${e.message}\nreopening the editor…`);
    }
  }
}

function describeChange(c: ConfigChangeView): string {
  const lines = ['settings saved.'];
  if (c.applied.length > 0) lines.push(`applied now: ${c.applied.join(', ')}`);
  if (c.restart_required.length > 0)
    lines.push(`take effect at the next restart: ${c.restart_required.join(', ')}`);
  if (c.overridden_by_env.length > 0)
    lines.push(`still set from the environment, over the file: ${c.overridden_by_env.join(', ')}`);
  return lines.join('\n');
}

function header(path: string, error: string | undefined, hidden: boolean): string {
  const lines = [
    `Editing the llmgw settings file ${path}.`,
    'Lines starting with "# llmgw:" are removed when you save. An unchanged file changes nothing.',
  ];
  if (hidden)
    lines.push(
      `hub.token shows as ${hiddenSecret}: left so, the token is kept; write a new one to replace it.`,
    );
  if (error !== undefined) lines.push('', 'The last save was refused:', ...error.split('\n'));
  return `${lines.map((l) => `${marker}${l}`.trimEnd()).join('\n')}\n`;
}

function stripHeader(text: string): string {
  return text
    .split('\n')
    .filter((l) => !l.startsWith(marker.trimEnd()))
    .join('\n');
}

function runEditor(env: NodeJS.ProcessEnv, file: string): void {
  const editor = env['VISUAL'] ?? env['EDITOR'] ?? 'vi';
  // Through a shell, as git and kubectl do, so EDITOR may carry arguments ("code --wait").
  const r = spawnSync(`${editor} '${file.replace(/'/g, `'\\''`)}'`, { shell: true, stdio: 'inherit', env });
  if (r.error !== undefined)
    throw new LlmgwError('unavailable', `cannot run the editor "${editor}": ${r.error.message}; set EDITOR`);
  if (r.status !== 0)
    throw new LlmgwError(
      'unavailable',
      `the editor "${editor}" exited with status ${r.status ?? 'unknown'}: nothing was changed`,
    );
}
