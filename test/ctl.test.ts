import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { freePort } from './fakes/engines/fake-engines.js';
import type { FakeHub } from './fakes/hub/hub.js';
import { childHome, llmgw, repoRoot, startDaemon, type Daemon } from './support/cli.js';
import { startTestHub } from './support/hub.js';

const adminKey = 'ctl-test-admin-key-0123456789abcdef';
const editor = `${process.execPath} ${join(import.meta.dirname, 'support', 'scripted-editor.mjs')}`;

describe('llmgw ctl against a running llmgw server', () => {
  let dir: string;
  let server: Daemon;
  let url: string;
  let env: Record<string, string>;
  let hub: FakeHub;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-ctl-'));
    writeFileSync(join(dir, 'config.yaml'), '# settings\nlisten: 127.0.0.1:0\n');
    // The examples' sources resolve against it.
    hub = await startTestHub();
    server = startDaemon(['server', '--config', join(dir, 'config.yaml')], {
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_DATA_DIR: dir,
      HF_ENDPOINT: hub.url,
    });
    url = (await server.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    env = { XDG_CONFIG_HOME: join(dir, 'xdg'), LLMGW_SERVER: url, LLMGW_KEY: adminKey };
  });
  afterAll(async () => {
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.output()).toContain('control plane stopped');
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const ctl = (args: string[], extra: Record<string, string> = {}, input?: string) =>
    llmgw(['ctl', ...args], { ...env, ...extra }, input);

  it('lists its commands, prints its version, and exits 2 on a wrong command line', async () => {
    const help = await llmgw(['--help']);
    expect(help.code).toBe(0);
    for (const c of ['server', 'up', 'ctl']) expect(help.stdout).toContain(c);
    const version = await llmgw(['--version']);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const wrong = await llmgw(['ctl', 'modles']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain("unknown command 'modles'");
    const missing = await llmgw(['ctl', 'model', 'add']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("required option '-f, --file <file>' not specified");
  });

  it('logs in once and then needs no flags; the saved key is readable by its owner only', async () => {
    const xdg = join(dir, 'xdg-login');
    const r = await llmgw(['ctl', 'login', '--server', url, '--key', adminKey], { XDG_CONFIG_HOME: xdg });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`logged in to ${url} as key "admin" (admin)`);
    const saved = join(xdg, 'llmgw', 'ctl.json');
    expect(statSync(saved).mode & 0o077).toBe(0);
    const models = await llmgw(['ctl', 'models'], { XDG_CONFIG_HOME: xdg });
    expect(models.code).toBe(0);
    const bad = await llmgw(
      ['ctl', 'login', '--server', url, '--key', 'llmgw_key_wrongwrongwrongwrongwrong'],
      { XDG_CONFIG_HOME: join(dir, 'xdg-bad') },
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('the API key is not valid');
    expect(existsSync(join(dir, 'xdg-bad', 'llmgw', 'ctl.json'))).toBe(false);
  });

  it('adds, lists, shows, gets, applies and removes a model', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(
      file,
      'name: tiny\nsource: /models/tiny.gguf\nprofiles:\n  - name: cpu\n    engine: llamacpp\n    cpu: true\n',
    );
    const add = await ctl(['model', 'add', '-f', file]);
    expect(add.code).toBe(0);
    expect(add.stdout.trim()).toBe('model "tiny" added (1 replica, profiles: cpu:llamacpp@cpu)');
    const again = await ctl(['model', 'add', '-f', file]);
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toBe(
      'error: model "tiny" already exists: change it with llmgw ctl model apply -f FILE, or pick another name',
    );

    const list = await ctl(['models']);
    expect(list.stdout.split('\n')[0]).toMatch(/^NAME\s+ORIGIN\s+REPLICAS\s+PROFILES\s+SOURCE\s+AGE$/);
    expect(list.stdout).toMatch(/tiny\s+api\s+1\s+cpu:llamacpp@cpu\s+\/models\/tiny\.gguf/);
    const json = JSON.parse((await ctl(['models', '--json'])).stdout);
    expect(json.items[0]).toMatchObject({ name: 'tiny', metadata: { origin: 'api', version: 1 } });

    const show = await ctl(['model', 'show', 'tiny']);
    expect(show.stdout).toMatch(/^Source: +\/models\/tiny\.gguf$/m);
    expect(show.stdout).toMatch(/^Problem: \/models\/tiny\.gguf is not on the control plane's machine/m);
    const get = await ctl(['model', 'get', 'tiny']);
    expect(get.stdout).toContain('name: tiny\nsource: /models/tiny.gguf');
    expect(get.stdout).toContain('created_by: admin');

    writeFileSync(file, readFileSync(file, 'utf8').replace('name: tiny', 'name: tiny\nreplicas: 2'));
    const apply = await ctl(['model', 'apply', '-f', file]);
    expect(apply.stdout.trim()).toBe('model "tiny" replaced (version 2)');
    const applyNew = await ctl(
      ['model', 'apply', '-f', '-'],
      {},
      JSON.stringify({
        name: 'fresh',
        source: '/m.gguf',
        profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
      }),
    );
    expect(applyNew.stdout.trim()).toBe('model "fresh" added (version 1)');

    expect((await ctl(['model', 'remove', 'fresh'])).stdout.trim()).toBe('model "fresh" removed');
    const gone = await ctl(['model', 'show', 'fresh']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('model "fresh" does not exist');
  });

  it('prints the server’s refusal of an invalid model and exits 1; a file it cannot read is a usage error (2)', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      'name: big\nsource: /m\nprofiles:\n  - {name: gpu, engine: llamacpp, gpu_class: a100-80g, tp: 4}\n',
    );
    const r = await ctl(['model', 'add', '-f', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "profiles[0].tp: llamacpp splits a model across a node's GPUs by layer, not by tp or pp: write gpus_per_node: 4 instead",
    );
    const json = await ctl(['model', 'add', '-f', file, '--json']);
    expect(JSON.parse(json.stderr).error.code).toBe('invalid_argument');
    const missing = await ctl(['model', 'add', '-f', join(dir, 'nope.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read');
    // A usage error in --json is the caller's mistake, not llmgw's.
    const missingJson = await ctl(['model', 'add', '-f', join(dir, 'nope.yaml'), '--json']);
    expect(missingJson.code).toBe(2);
    expect(JSON.parse(missingJson.stderr).error).toMatchObject({
      code: 'invalid_argument',
      message: expect.stringContaining(`cannot read ${join(dir, 'nope.yaml')}`),
    });
    writeFileSync(
      join(dir, 'broken.yaml'),
      'name: tiny\nprofiles: [\n  {name: cpu, engine: llamacpp, cpu: true\n',
    );
    const broken = await ctl(['model', 'add', '-f', join(dir, 'broken.yaml')]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toBe(
      [
        `error: ${join(dir, 'broken.yaml')} is not valid YAML or JSON: line 4, column 1: Flow map in block collection must be sufficiently indented and end with a }`,
        '  3 |   {name: cpu, engine: llamacpp, cpu: true',
        '  4 |',
        '    | ^',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'settings-like.yaml'), 'models: []\n');
    const settingsLike = await ctl(['model', 'add', '-f', join(dir, 'settings-like.yaml')]);
    expect(settingsLike.code).toBe(2);
    expect(settingsLike.stderr).toContain('looks like a settings file');
  });

  it('creates, lists and revokes keys; a user key is refused admin commands', async () => {
    const created = await ctl(['key', 'create', 'bob', '--role', 'user', '--json']);
    expect(created.code).toBe(0);
    const { secret } = JSON.parse(created.stdout);
    const human = await ctl(['key', 'create', 'carol']);
    expect(human.stdout).toMatch(
      /key "carol" \(user\) created\. Its secret, shown only this once:\n\n {2}llmgw_key_\w{32}/,
    );
    const keys = await ctl(['keys']);
    expect(keys.stdout).toMatch(/bob\s+user\s+llmgw_key_\w{4}\.\.\./);
    expect(keys.stdout).not.toContain(secret);
    const denied = await ctl(['key', 'create', 'eve'], { LLMGW_KEY: secret });
    expect(denied.code).toBe(1);
    expect(denied.stderr.trim()).toBe('error: this needs an admin key; key "bob" has the user role');
    const role = await ctl(['key', 'create', 'x', '--role', 'root']);
    expect(role.code).toBe(2);
    expect((await ctl(['key', 'revoke', 'bob'])).stdout.trim()).toBe('key "bob" revoked');
    const revoked = await ctl(['models'], { LLMGW_KEY: secret });
    expect(revoked.code).toBe(1);
    expect(revoked.stderr).toContain('the API key is not valid');
  });

  it('shows the audit log, filtered', async () => {
    const r = await ctl(['audit', '--since', '1h', '--action', 'key.revoke']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/admin\s+key\.revoke\s+key\/bob/);
    const json = JSON.parse((await ctl(['audit', '--json', '--limit', '3'])).stdout);
    expect(json.items).toHaveLength(3);
    const bad = await ctl(['audit', '--since', 'last tuesday']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--since last tuesday is neither a time');
  });

  it('lists replicas waiting for room: the state alone, the reason cut in a column of its own, null (not "-") in --json', async () => {
    const profiles = ['first', 'second', 'third'].map((name) => ({ name, engine: 'llamacpp', cpu: true }));
    expect(
      (
        await ctl(
          ['model', 'add', '-f', '-'],
          {},
          JSON.stringify({ name: 'wide', source: '/m.gguf', profiles }),
        )
      ).code,
    ).toBe(0);
    const reason =
      'profile first: no ready node (no node has joined); profile second: no ready node (no node has joined); profile third: no ready node (no node has joined)';
    const json = JSON.parse((await ctl(['replicas', 'wide', '--json'])).stdout);
    expect(json.items).toEqual([
      {
        id: null,
        model: 'wide',
        profile: null,
        engine: 'llamacpp',
        state: 'pending',
        reason,
        restarts: 0,
        shards: [],
      },
    ]);
    const table = (await ctl(['replicas', 'wide'])).stdout.trimEnd().split('\n');
    expect(table[0]).toMatch(
      /^REPLICA\s+MODEL\s+PROFILE\s+NODE\s+DEVICES\s+STATE\s+READY\s+RESTARTS\s+ENDPOINT\s+REASON$/,
    );
    const cut = `${reason.slice(0, 59).trimEnd()}…`;
    expect(cut.length).toBeLessThanOrEqual(60);
    expect(table[1]).toMatch(/^-\s+wide\s+-\s+-\s+-\s+pending\s+-\s+0\s+-\s+(.*)$/);
    expect(table[1]?.endsWith(`   ${cut}`)).toBe(true);
    expect((await ctl(['model', 'rm', 'wide'])).code).toBe(0);
    const none = await ctl(['replicas', 'wide']);
    expect(none.code).toBe(1);
    expect(none.stderr.trim()).toBe('error: model "wide" does not exist (llmgw ctl models lists them)');
  });

  it('filters usage by a key name with --key-name; --key stays the API key, and a name given there is refused with what to write', async () => {
    const byName = await ctl(['usage', '--key-name', 'carol', '--since', '1h']);
    expect(byName.code).toBe(0);
    expect(byName.stdout.trim()).toBe('No usage recorded for that.');
    const asKey = await ctl(['usage', '--key', adminKey, '--json']);
    expect(asKey.code).toBe(0);
    expect(JSON.parse(asKey.stdout)).toEqual({ items: [] });
    const old = await ctl(['usage', '--key', 'carol']);
    expect(old.code).toBe(1);
    expect(old.stderr.trim()).toBe(
      "error: the API key is not valid: it was revoked, or mistyped (an admin can make one with llmgw ctl key create)\nhint: --key is the API key; to show one key's usage, write llmgw ctl usage --key-name NAME",
    );
  });

  it('adds each example model under examples/ as it is', async () => {
    const examples = join(repoRoot, 'examples');
    for (const file of readdirSync(examples).filter((f) => f.endsWith('.yaml'))) {
      const r = await ctl(['model', 'add', '-f', join(examples, file)]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const name = /^name: (\S+)$/m.exec(readFileSync(join(examples, file), 'utf8'))?.[1] ?? '';
      expect(r.stdout).toMatch(new RegExp(`^model "${name}" added`));
      expect((await ctl(['model', 'rm', name])).code).toBe(0);
    }
  });

  describe('config edit', () => {
    const edit = (edits: unknown[]) => {
      const state = join(dir, `editor-${Math.random().toString(36).slice(2)}`);
      return {
        state,
        run: ctl(['config', 'edit'], {
          EDITOR: editor,
          LLMGW_TEST_EDITS: JSON.stringify(edits),
          LLMGW_TEST_EDITS_STATE: state,
        }),
      };
    };

    it('changes nothing when the file is saved unchanged', async () => {
      const before = readFileSync(join(dir, 'config.yaml'), 'utf8');
      const { run } = edit([{}]);
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe('Edit cancelled: no changes made.');
      expect(readFileSync(join(dir, 'config.yaml'), 'utf8')).toBe(before);
    });

    it('saves a valid change, keeping the file’s comments, and applies new models at once', async () => {
      const { run, state } = edit([
        {
          append:
            'models:\n  - {name: declared, source: /m.gguf, profiles: [{name: cpu, engine: llamacpp, cpu: true}]}\n',
        },
      ]);
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('settings saved.\napplied now: models');
      expect(readFileSync(`${state}.shown-0`, 'utf8')).toContain('# llmgw: Editing the llmgw settings file');
      const saved = readFileSync(join(dir, 'config.yaml'), 'utf8');
      expect(saved.startsWith('# settings\nlisten: 127.0.0.1:0\nmodels:')).toBe(true);
      expect(saved).not.toContain('# llmgw:');
      expect((await ctl(['models'])).stdout).toMatch(/declared\s+config/);
      const shown = await ctl(['config', 'show']);
      expect(shown.stdout).toContain('name: declared');
    });

    it('reopens the editor with the error on top, and saves once it is fixed', async () => {
      const { run, state } = edit([
        { append: 'listn: 127.0.0.1:1\n' },
        { replace: ['listn: 127.0.0.1:1\n', ''], append: 'agent: {engines: {llamacpp: {threads: 2}}}\n' },
      ]);
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.stderr).toContain('unknown key "listn"; did you mean "listen"?');
      const second = readFileSync(`${state}.shown-1`, 'utf8');
      expect(second).toMatch(
        /# llmgw: The last save was refused:\n# llmgw: invalid settings, nothing was applied:\n# llmgw: .*config\.yaml:\d+: listn: unknown key "listn"; did you mean "listen"\?/,
      );
      expect(readFileSync(join(dir, 'config.yaml'), 'utf8')).toContain('threads: 2');
    });

    it('lists the errors of a refused save in the order of the file, and shows a YAML error on its line', async () => {
      // The schema has placement before gateway: its problem came first, wherever it was in the file.
      const wrong = 'gateway:\n  max_body_mb: lots\nplacement:\n  ports: 30000-20000\n';
      const { run, state } = edit([{ append: wrong }, { replace: [wrong, 'models: [\n'] }, {}]);
      const r = await run;
      expect(r.code).toBe(1);
      const first = readFileSync(`${state}.shown-1`, 'utf8');
      const found = [...first.matchAll(/config\.yaml:(\d+): (\S+):/g)].map(
        (m) => [Number(m[1]), m[2]] as const,
      );
      expect(found.map(([, key]) => key)).toEqual(['gateway.max_body_mb', 'placement.ports']);
      expect(found[0]![0]).toBeLessThan(found[1]![0]);
      const second = readFileSync(`${state}.shown-2`, 'utf8');
      expect(second).toMatch(
        /# llmgw: \S+config\.yaml:(\d+): not valid YAML at column 1: Flow sequence in block collection must be sufficiently indented and end with a \]\n# llmgw: +\d+ \| models: \[\n# llmgw: +\d+ \|\n# llmgw: +\| \^\n/,
      );
    });

    it('gives up, keeping the edit, when the error is saved again unchanged', async () => {
      const before = readFileSync(join(dir, 'config.yaml'), 'utf8');
      const { run } = edit([{ append: 'listen: twice\n' }, {}]);
      const r = await run;
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /edit cancelled: the settings still have the error shown; your changes are kept in \S+config\.yaml/,
      );
      expect(readFileSync(join(dir, 'config.yaml'), 'utf8')).toBe(before);
    });

    it('never shows hub.token, and keeps it through an edit that leaves it as shown', async () => {
      const token = 'hf_ctl_edit_token_0123456789';
      const set = edit([{ append: `hub:\n  token: ${token}\n` }]);
      expect((await set.run).code).toBe(0);
      expect(readFileSync(join(dir, 'config.yaml'), 'utf8')).toContain(`  token: ${token}\n`);
      const shown = await ctl(['config', 'show']);
      expect(shown.stdout).toContain('  token: (hidden)\n');
      expect(shown.stdout + (await ctl(['config', 'show', '--json'])).stdout).not.toContain(token);

      const { run, state } = edit([{ append: 'placement: {node_lost_after_s: 45}\n' }]);
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('applied now: placement');
      const inEditor = readFileSync(`${state}.shown-0`, 'utf8');
      expect(inEditor).toContain('# llmgw: hub.token shows as (hidden): left so, the token is kept');
      expect(inEditor).toContain('  token: (hidden)\n');
      expect(inEditor).not.toContain(token);
      const saved = readFileSync(join(dir, 'config.yaml'), 'utf8');
      expect(saved).toContain(`  token: ${token}\nplacement: {node_lost_after_s: 45}\n`);
      expect(saved).not.toContain('(hidden)');
      expect(server.output()).not.toContain(token);
    });

    it('stops, changing nothing, when the editor fails', async () => {
      const { run } = edit([{ append: 'x: 1\n', exit: 3 }]);
      const r = await run;
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('exited with status 3: nothing was changed');
    });
  });

  it('says how to reach a server it cannot reach (exit 1)', async () => {
    // A port the OS just handed out, that nothing listens on: a fixed one may be taken on this machine.
    const closed = `http://127.0.0.1:${await freePort()}`;
    const r = await llmgw(['ctl', 'models', '--server', closed], { XDG_CONFIG_HOME: join(dir, 'none') });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach the control plane at ${closed} (ECONNREFUSED): is it running?`);
  });

  it('says a change whose answer was lost may have been made, and how to tell (exit 1)', async () => {
    // A control plane that reads the request whole and closes without answering (killed, or a proxy's cut).
    const cut = createServer((socket) => {
      let got = '';
      socket.on('error', () => undefined);
      socket.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        const end = got.indexOf('\r\n\r\n');
        const length = Number(/content-length: *(\d+)/i.exec(got)?.[1] ?? 0);
        if (end >= 0 && got.length >= end + 4 + length) socket.destroy();
      });
    });
    await new Promise<void>((resolve) => cut.listen(0, '127.0.0.1', resolve));
    const server = `http://127.0.0.1:${(cut.address() as AddressInfo).port}`;
    try {
      const r = await llmgw(['ctl', 'key', 'create', 'ci', '--server', server, '--key', 'k'], {
        XDG_CONFIG_HOME: join(dir, 'none'),
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `the control plane at ${server} took this change but its answer did not come (other side closed), so it may have been made or not: llmgw ctl keys, or llmgw ctl audit --since 10m shows whether it was; make it again only if it was not`,
      );
      expect(r.stderr).not.toContain('is it running?');
    } finally {
      cut.close();
    }
  });

  it('reads the saved login from HOME when XDG_CONFIG_HOME is unset, and names a file that is not one', async () => {
    // childHome, not the user's home: a test never reads or writes the login of a real cluster.
    const saved = join(childHome, '.config', 'llmgw', 'ctl.json');
    mkdirSync(dirname(saved), { recursive: true });
    writeFileSync(saved, 'not a login');
    try {
      const r = await llmgw(['ctl', 'models']);
      expect(r.stderr).toContain(`${saved} is not a saved login: run llmgw ctl login again, or delete it`);
      expect(r.code).toBe(2);
    } finally {
      rmSync(saved);
    }
  });
});

describe('llmgw server and llmgw up', () => {
  it('refuse an invalid settings file before starting, naming file, line and key (exit 2)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-bad-'));
    const file = join(dir, 'llmgw.yaml');
    writeFileSync(file, 'listen: 127.0.0.1:0\nagent:\n  engines:\n    llamacpp:\n      paralel: 8\n');
    const r = await llmgw(['server', '--config', file], { LLMGW_DATA_DIR: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `${file}:5: agent.engines.llamacpp.paralel: unknown key "paralel"; did you mean "parallel"?`,
    );
    expect(existsSync(join(dir, 'llmgw.db'))).toBe(false);
    rmSync(dir, { recursive: true, force: true });
  });

  it('up: shows a generated admin key once, saves the login, keeps everything across a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-up-'));
    const env = { XDG_CONFIG_HOME: join(dir, 'xdg'), LLMGW_LISTEN: '127.0.0.1:0' };
    const first = startDaemon(['up'], env, dir);
    const key = (await first.waitFor(/shown only this once[^\n]*\n\n\s+(llmgw_key_\w+)/))[1]!;
    const url = (await first.waitFor(/"url":"(http:\/\/[\d.:]+)"/))[1]!;
    expect(existsSync(join(dir, '.llmgw', 'llmgw.db'))).toBe(true);
    const add = await llmgw(
      ['ctl', 'model', 'add', '-f', '-'],
      env,
      JSON.stringify({
        name: 'kept',
        source: '/m.gguf',
        profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
      }),
    );
    expect(add.code).toBe(0);
    expect(await first.stop('SIGINT')).toBe(0);
    expect(first.output()).not.toMatch(new RegExp(`"level".*${key}`));

    const second = startDaemon(['up'], env, dir);
    const url2 = (await second.waitFor(/"url":"(http:\/\/[\d.:]+)"/))[1]!;
    expect(second.output()).not.toContain('shown only this once');
    const models = await llmgw(['ctl', 'models', '--server', url2, '--key', key], env);
    expect(models.stdout).toContain('kept');
    expect(await second.stop('SIGTERM')).toBe(0);
    expect(url).toMatch(/^http:/);
    rmSync(dir, { recursive: true, force: true });
  });
});
