import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { llmgw, startDaemon, type Daemon } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';

/**
 * Settings files llmgw refuses, the same way whether they come through PUT /api/v1/config,
 * `llmgw ctl config edit` or a start: with the file's line, in words, changing nothing.
 */

const declared = `# the team's models
models:
  - name: tiny
    source: /models/tiny.gguf
    profiles:
      - name: cpu
        engine: llamacpp
        cpu: true
`;

/** Nine anchors, each a list of nine aliases of the one before: 9^9 values in ten lines. */
const bomb = (first: string) =>
  [
    first,
    'a: &a [x, x, x, x, x, x, x, x, x]',
    ...'bcdefghi'.split('').map((n, i) => `${n}: &${n} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(', ')}]`),
    '',
  ].join('\n');
const bombWords =
  "aliases repeat more than 10000 values by the alias *d: each alias stands for its anchor's whole value, and aliases of aliases multiply; write the values out";
const databaseFix =
  'name the database llmgw made, or a new file (llmgw creates it), or leave database: out for DATA_DIR/llmgw.db';

describe('PUT /api/v1/config', () => {
  let t: TestControlPlane;
  const put = (text: string) =>
    api(t.url, t.adminKey, 'PUT', '/config', text, { 'content-type': 'application/yaml' });

  beforeAll(async () => {
    t = await startControlPlane({ config: declared });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('refuses an alias bomb, an alias of no anchor, 100,000 levels of nesting and 256 KiB in words', async () => {
    const refusals: [string, number, string][] = [
      [bomb('listen: 127.0.0.1:0'), 400, `${t.configPath}:6: ${bombWords}`],
      [
        'models: *team\n',
        400,
        `${t.configPath}:1: the alias *team names no anchor before it: put &team on the value it stands for, above the alias`,
      ],
      [
        `models: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`,
        400,
        `${t.configPath}:1: nests lists and mappings more than 64 levels deep at column 72: no llmgw document needs that; flatten it`,
      ],
      [
        `listen: 127.0.0.1:0\n#${' '.repeat(300_000)}\n`,
        413,
        "the settings file was not changed: a settings file holds at most 256 KiB: no cluster's settings need more; declare models through the API (llmgw ctl model add) rather than in the file",
      ],
    ];
    for (const [text, status, words] of refusals) {
      const r = await put(text);
      expect([r.status, r.body.error.message]).toEqual([status, expect.stringContaining(words)]);
    }
    expect(readFileSync(t.configPath, 'utf8')).toBe(declared);
    expect((await api(t.url, t.adminKey, 'GET', '/health')).status).toBe(200);
  });

  it('refuses a database that is no llmgw database and a data dir in a system folder, saying where each resolved', async () => {
    writeFileSync(join(t.dir, 'notes.txt'), 'my notes\n');
    const up = '../'.repeat(t.dir.split('/').length);
    // This control plane runs with LLMGW_DATA_DIR: the file must hold without it too.
    const alone =
      'invalid settings, nothing was applied; the file on its own, as a start without LLMGW_DATA_DIR reads it:';
    const refusals: [string, string][] = [
      [
        `${declared}database: sqlite:/etc/passwd\n`,
        `invalid settings, nothing was applied:\n${t.configPath}:9: database: sqlite:/etc/passwd is under /etc, a folder of the system: ${databaseFix}`,
      ],
      [
        `database: sqlite:notes.txt\n${declared}`,
        `invalid settings, nothing was applied:\n${t.configPath}:1: database: sqlite:${join(t.dir, 'notes.txt')} (sqlite:notes.txt from the working directory ${t.dir}) is a file that is not an SQLite database, which llmgw neither uses nor changes: ${databaseFix}`,
      ],
      [
        `data_dir: ${up}etc\n`,
        `${alone}\n${t.configPath}:1: data_dir: /etc (${up}etc from the working directory ${t.dir}) is a folder of the system: llmgw would write its files there; give it a folder of its own, e.g. /var/lib/llmgw (llmgw creates it)`,
      ],
    ];
    for (const [text, message] of refusals) {
      const r = await put(text);
      expect([r.status, r.body.error.message]).toEqual([400, message]);
    }
    expect(readFileSync(t.configPath, 'utf8')).toBe(declared);
  });

  it('validates the file as the file it will be, not only with the environment that overrides it now', async () => {
    const other = await startControlPlane({
      config: 'listen: 127.0.0.1:0\n',
      env: { LLMGW_LISTEN: '127.0.0.1:0' },
    });
    try {
      const send = (text: string) =>
        api(other.url, other.adminKey, 'PUT', '/config', text, { 'content-type': 'application/yaml' });
      const r = await send('listen: 127.0.0.1:99999\n');
      expect([r.status, r.body.error.message]).toEqual([
        400,
        `invalid settings, nothing was applied; the file on its own, as a start without LLMGW_LISTEN, LLMGW_DATA_DIR reads it:\n${other.configPath}:1: listen: expected HOST:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:8080 (every interface) or [::1]:8080`,
      ]);
      expect(readFileSync(other.configPath, 'utf8')).toBe('listen: 127.0.0.1:0\n');
      expect((await send('listen: 127.0.0.1:9\n')).body).toMatchObject({
        changed: true,
        overridden_by_env: ['listen', 'data_dir'],
      });
    } finally {
      await other.stop();
    }
  });
});

describe('llmgw ctl config edit', () => {
  let dir: string;
  let server: Daemon;
  let url: string;
  const adminKey = 'settings-refusals-admin-key-0123456789';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-edit-refusals-'));
    writeFileSync(join(dir, 'config.yaml'), '# settings\nlisten: 127.0.0.1:0\n');
    server = startDaemon(['server', '--config', join(dir, 'config.yaml')], {
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_DATA_DIR: dir,
    });
    url = (await server.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/))[1] ?? '';
  });
  afterAll(async () => {
    expect(await server.stop('SIGTERM')).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('reopens on an alias bomb and on a database that is no llmgw database, saying why in words', async () => {
    const editor = `${process.execPath} ${join(import.meta.dirname, 'support', 'scripted-editor.mjs')}`;
    const state = join(dir, 'editor');
    const text = bomb('# more');
    const r = await llmgw(['ctl', 'config', 'edit'], {
      LLMGW_SERVER: url,
      LLMGW_KEY: adminKey,
      EDITOR: editor,
      LLMGW_TEST_EDITS: JSON.stringify([
        { append: text },
        { replace: [text, 'database: sqlite:/etc/passwd\n'] },
        { replace: ['database: sqlite:/etc/passwd\n', ''] },
      ]),
      LLMGW_TEST_EDITS_STATE: state,
    });
    expect(r.stdout.trim()).toBe('Edit cancelled: no changes made.');
    expect(r.code).toBe(0);
    const file = join(dir, 'config.yaml');
    expect(readFileSync(`${state}.shown-1`, 'utf8')).toContain(`# llmgw: ${file}:8: ${bombWords}\n`);
    expect(readFileSync(`${state}.shown-2`, 'utf8')).toContain(
      `# llmgw: ${file}:3: database: sqlite:/etc/passwd is under /etc, a folder of the system: ${databaseFix}\n`,
    );
    expect(readFileSync(file, 'utf8')).toBe('# settings\nlisten: 127.0.0.1:0\n');
  });
  it('reopens on a file over 256 KiB, saying why', async () => {
    // An editor of its own: 300 KB of edit do not fit in the scripted editor's environment.
    const script = join(dir, 'big-editor.mjs');
    writeFileSync(
      script,
      [
        "import { existsSync, readFileSync, writeFileSync } from 'node:fs';",
        'const [state, file] = process.argv.slice(2);',
        "const n = existsSync(state) ? Number(readFileSync(state, 'utf8')) : 0;",
        'writeFileSync(state, String(n + 1));',
        "const shown = readFileSync(file, 'utf8');",
        'writeFileSync(`${state}.shown-${n}`, shown);',
        "const big = `#${' '.repeat(300000)}\\n`;",
        "writeFileSync(file, n === 0 ? shown + big : shown.replace(big, ''));",
      ].join('\n'),
    );
    const state = join(dir, 'big-editor');
    const r = await llmgw(['ctl', 'config', 'edit'], {
      LLMGW_SERVER: url,
      LLMGW_KEY: adminKey,
      EDITOR: `${process.execPath} ${script} ${state}`,
    });
    expect(r.stdout.trim()).toBe('Edit cancelled: no changes made.');
    expect(readFileSync(`${state}.shown-1`, 'utf8')).toContain(
      "# llmgw: the settings file was not changed: a settings file holds at most 256 KiB: no cluster's settings need more; declare models through the API (llmgw ctl model add) rather than in the file\n",
    );
  });
});

describe('a start', () => {
  it('refuses an alias bomb in words, with file and line (exit 2)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-bomb-'));
    const file = join(dir, 'llmgw.yaml');
    writeFileSync(file, bomb('listen: 127.0.0.1:0'));
    const r = await llmgw(['server', '--config', file], { LLMGW_DATA_DIR: dir });
    expect(r.stderr).toBe(
      `error: invalid settings, nothing was applied:\n${file}:6: ${bombWords}\n${[
        '  5 | d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]',
        '  6 | e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]',
        '    |        ^',
      ].join('\n')}\n`,
    );
    expect(r.code).toBe(2);
    rmSync(dir, { recursive: true, force: true });
  });

  it('of llmgw up refuses a database that is no llmgw database and a data dir of others, changing no mode (exit 2)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-not-ours-'));
    const notes = join(dir, 'notes.txt');
    writeFileSync(notes, 'my notes\n', { mode: 0o644 });
    const home = join(dir, 'home');
    mkdirSync(join(home, 'Documents'), { recursive: true });
    chmodSync(home, 0o755);
    const file = join(dir, 'llmgw.yaml');
    writeFileSync(file, `listen: 127.0.0.1:0\ndatabase: sqlite:${notes}\ndata_dir: ${home}\n`);
    const r = await llmgw(['up', '-c', file]);
    expect(r.stderr).toBe(
      [
        'error: invalid settings, nothing was applied:',
        `${file}:2: database: sqlite:${notes} is a file that is not an SQLite database, which llmgw neither uses nor changes: ${databaseFix}`,
        `${file}:3: data_dir: ${home} already holds files that are not llmgw's (Documents): llmgw keeps its files in a folder of its own; name a new or empty folder (llmgw creates it), or move those files out`,
        '',
      ].join('\n'),
    );
    expect(r.code).toBe(2);
    const mode = (p: string) => (statSync(p).mode & 0o777).toString(8);
    expect([mode(notes), mode(home)]).toEqual(['644', '755']);
    expect(readdirSync(home)).toEqual(['Documents']);
    expect(readdirSync(dir).sort()).toEqual(['home', 'llmgw.yaml', 'notes.txt']);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('llmgw ctl model add -f', () => {
  it('refuses a model file that is an alias bomb, or nested past 64 levels, before sending it (exit 2)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-model-file-'));
    const env = { LLMGW_SERVER: 'http://127.0.0.1:9', LLMGW_KEY: 'llmgw_key_unused0123456789' };
    const cases: [string, number, string][] = [
      [bomb('name: tiny'), 6, bombWords],
      [
        `name: tiny\nprofiles: ${'['.repeat(70)}${']'.repeat(70)}\n`,
        2,
        'nests lists and mappings more than 64 levels deep at column 74: no llmgw document needs that; flatten it',
      ],
    ];
    for (const [i, [text, line, words]] of cases.entries()) {
      const file = join(dir, `model-${i}.yaml`);
      writeFileSync(file, text);
      const r = await llmgw(['ctl', 'model', 'add', '-f', file], env);
      expect(r.stderr).toContain(`error: ${file}: line ${line}: ${words}\n`);
      expect(r.code).toBe(2);
    }
    rmSync(dir, { recursive: true, force: true });
  });
});
