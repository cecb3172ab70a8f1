import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadSettings, SettingsError } from './load.js';

function dir(): string {
  return mkdtempSync(join(tmpdir(), 'llmgw-config-'));
}

function load(text: string | undefined, env: Record<string, string> = {}) {
  const d = dir();
  const path = join(d, 'llmgw.yaml');
  if (text !== undefined) writeFileSync(path, text);
  return loadSettings({
    path: text === undefined ? undefined : path,
    env: { LLMGW_DATA_DIR: join(d, 'data'), ...env },
    cwd: d,
  });
}

function refusal(text: string, env: Record<string, string> = {}): SettingsError {
  try {
    load(text, env);
  } catch (e) {
    if (e instanceof SettingsError) return e;
    throw e;
  }
  throw new Error('expected the settings to be refused');
}

describe('settings', () => {
  it('has working defaults with no file at all', () => {
    const d = dir();
    const { settings, source } = loadSettings({ env: {}, cwd: d });
    expect(settings.listen).toBe('127.0.0.1:8080');
    expect(settings.data_dir).toBe(join(d, '.llmgw'));
    expect(settings.database).toBe(`sqlite:${join(d, '.llmgw', 'llmgw.db')}`);
    expect(settings.agent.engines.llamacpp).toEqual({
      parallel: 4,
      threads: 0,
      build: 'b10587',
      release_url: 'https://github.com/ggml-org/llama.cpp/releases/download',
    });
    expect(settings.agent.engines.sglang).toEqual({ bin: 'python3' });
    expect(settings.placement).toEqual({ ports: '20000-29999', node_lost_after_s: 60, cpu_threads: 0 });
    expect(settings.models).toEqual([]);
    expect(source).toMatchObject({ path: join(d, '.llmgw', 'config.yaml'), exists: false, text: '' });
  });

  it('reads the file and the models it declares', () => {
    const { settings } = load(
      [
        'listen: 0.0.0.0:9000',
        'database: postgres://u@db:5432/llmgw',
        'agent:',
        '  engines:',
        '    llamacpp:',
        '      bin: /opt/llama-server',
        '      threads: 8',
        'models:',
        '  - name: tiny',
        '    source: /m/tiny.gguf',
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
      ].join('\n'),
    );
    expect(settings.listen).toBe('0.0.0.0:9000');
    expect(settings.database).toBe('postgres://u@db:5432/llmgw');
    expect(settings.agent.engines.llamacpp).toMatchObject({
      bin: '/opt/llama-server',
      parallel: 4,
      threads: 8,
    });
    expect(settings.models.map((m) => m.name)).toEqual(['tiny']);
    expect(Object.isFrozen(settings.models)).toBe(true);
  });

  it('lets the environment win over the file, key by key', () => {
    const { settings, source } = load(
      'listen: 127.0.0.1:8080\nagent: {engines: {llamacpp: {parallel: 2}}}\n',
      {
        LLMGW_LISTEN: '127.0.0.1:9999',
        LLMGW_DATABASE: 'sqlite:/tmp/x.db',
        LLMGW_AGENT_ENGINES_LLAMACPP_BIN: '/usr/local/bin/llama-server',
        LLMGW_AGENT_ENGINES_LLAMACPP_PARALLEL: '8',
      },
    );
    expect(settings.listen).toBe('127.0.0.1:9999');
    expect(settings.database).toBe('sqlite:/tmp/x.db');
    expect(settings.agent.engines.llamacpp).toMatchObject({
      bin: '/usr/local/bin/llama-server',
      parallel: 8,
      threads: 0,
    });
    expect(source.fromEnv).toEqual([
      'listen',
      'database',
      'data_dir',
      'agent.engines.llamacpp.bin',
      'agent.engines.llamacpp.parallel',
    ]);
  });

  it('takes models from the environment as YAML', () => {
    const { settings } = load(undefined, {
      LLMGW_MODELS: '[{name: e, source: /m.gguf, profiles: [{name: c, engine: llamacpp, cpu: true}]}]',
    });
    expect(settings.models.map((m) => m.name)).toEqual(['e']);
  });

  it('uses LLMGW_CONFIG when no --config is given', () => {
    const d = dir();
    const path = join(d, 'from-env.yaml');
    writeFileSync(path, 'listen: 127.0.0.1:7000\n');
    expect(loadSettings({ env: { LLMGW_CONFIG: path }, cwd: d }).settings.listen).toBe('127.0.0.1:7000');
  });

  it('refuses a named file that does not exist', () => {
    expect(() => loadSettings({ path: '/nonexistent/llmgw.yaml', env: {} })).toThrow(
      'settings file /nonexistent/llmgw.yaml does not exist: create it, or leave out --config',
    );
  });

  it('names file, line and key of a misspelt key, with the likely intended one', () => {
    const e = refusal('listen: 127.0.0.1:8080\ndata_dri: /var/lib/llmgw\n');
    expect(e.message).toMatch(/llmgw\.yaml:2: data_dri: unknown key "data_dri"; did you mean "data_dir"\?/);
    expect(e.message).toContain('nothing was applied');
  });

  it('names the line of a nested key of the wrong type', () => {
    const e = refusal('agent:\n  engines:\n    llamacpp:\n      parallel: many\n');
    expect(e.message).toMatch(
      /llmgw\.yaml:4: agent\.engines\.llamacpp\.parallel: expected a number, got "many"/,
    );
  });

  it('names the line of a catalog rule broken inside models:', () => {
    const e = refusal(
      [
        'models:',
        '  - name: big',
        '    source: /m/big',
        '    profiles:',
        '      - name: gpu',
        '        engine: llamacpp',
        '        gpu_class: a100-80g',
        '        tp: 2',
      ].join('\n'),
    );
    expect(e.message).toMatch(
      /llmgw\.yaml:8: models\[0\]\.profiles\[0\]\.tp: llamacpp splits a model .* write gpus_per_node: 2 instead/,
    );
  });

  it('explains listen and database values it cannot use', () => {
    expect(refusal('listen: 8080\n').message).toMatch(
      /:1: listen: expected HOST:PORT, e\.g\. 127\.0\.0\.1:8080/,
    );
    expect(refusal('database: mysql://x\n').message).toMatch(
      /:1: database: expected sqlite:PATH .* or a PostgreSQL URL/,
    );
  });

  it('reports YAML syntax errors with their line and column, what was expected, and the line with a caret', () => {
    const bracket = refusal('listen: 127.0.0.1:8080\nmodels: [\n');
    expect(bracket.message).toMatch(
      /llmgw\.yaml:3: not valid YAML at column 1: Flow sequence in block collection must be sufficiently indented and end with a \]\n {2}2 \| models: \[\n {2}3 \|\n {4}\| \^$/,
    );
    const nested = refusal('listen: 127.0.0.1:8080\ndata_dir: a: b\n').message;
    expect(nested.split('\n').slice(1)).toEqual([
      expect.stringMatching(
        /llmgw\.yaml:2: not valid YAML at column 11: Nested mappings are not allowed in compact mappings$/,
      ),
      '  1 | listen: 127.0.0.1:8080',
      '  2 | data_dir: a: b',
      '    |           ^',
    ]);
    expect(refusal('listen: a\nlisten: b\n').message).toMatch(
      /llmgw\.yaml:2: not valid YAML at column 1: Map keys must be unique\n/,
    );
  });

  it('refuses an alias bomb, and an alias of no anchor, in words, at the alias’s line', () => {
    const bomb = [
      'listen: 127.0.0.1:8080',
      'a: &a [x, x, x, x, x, x, x, x, x]',
      ...'bcdefghi'
        .split('')
        .map((n, i) => `${n}: &${n} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(', ')}]`),
    ].join('\n');
    expect(refusal(bomb).message.split('\n').slice(0, 2)).toEqual([
      'invalid settings, nothing was applied:',
      expect.stringMatching(
        /llmgw\.yaml:6: aliases repeat more than 10000 values by the alias \*d: each alias stands for its anchor's whole value, and aliases of aliases multiply; write the values out$/,
      ),
    ]);
    expect(refusal('listen: 127.0.0.1:8080\nmodels: *team\n').message).toMatch(
      /llmgw\.yaml:2: the alias \*team names no anchor before it: put &team on the value it stands for, above the alias\n {2}1 \| listen: 127\.0\.0\.1:8080\n {2}2 \| models: \*team\n {4}\| {9}\^$/,
    );
  });

  it('refuses a document nested past 64 levels before parsing it, and a file over 256 KiB before reading it', () => {
    expect(
      refusal(`listen: 127.0.0.1:8080\nmodels: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`).message,
    ).toMatch(
      /llmgw\.yaml:2: nests lists and mappings more than 64 levels deep at column 72: no llmgw document needs that; flatten it\n/,
    );
    const big = `listen: 127.0.0.1:8080\n#${'x'.repeat(256 * 1024)}\n`;
    expect(refusal(big).message).toMatch(
      new RegExp(
        `llmgw\\.yaml: the file is ${big.length} bytes, and a settings file holds at most 256 KiB: no cluster's settings need more; declare models through the API \\(llmgw ctl model add\\) rather than in the file$`,
      ),
    );
  });

  it('lists every problem in the order of the file', () => {
    const e = refusal('placement:\n  ports: 30000-20000\nlisten: 8080\nagent:\n  heartbeat_ms: soon\n');
    expect(
      e.message
        .split('\n')
        .slice(1)
        .map((l) => /:(\d+): /.exec(l)?.[1]),
    ).toEqual(['2', '3', '5']);
  });

  it('refuses a file that is not a mapping', () => {
    expect(refusal('- a\n- b\n').message).toContain(
      'expected a mapping of keys (listen:, database:, models:, ...) at the top',
    );
  });

  it('names the environment variable behind a bad value', () => {
    const e = refusal('', { LLMGW_AGENT_ENGINES_LLAMACPP_THREADS: 'lots' });
    expect(e.message).toContain(
      'agent.engines.llamacpp.threads: expected a number, got "lots" (from the environment variable LLMGW_AGENT_ENGINES_LLAMACPP_THREADS)',
    );
  });

  it('warns of LLMGW_ variables that set nothing', () => {
    const { warnings } = load('', { LLMGW_LISTN: ':8080', LLMGW_ADMIN_KEY: 'x'.repeat(30) });
    expect(warnings).toEqual(['environment variable LLMGW_LISTN sets nothing; did you mean LLMGW_LISTEN?']);
  });

  it('refuses a port range it cannot use, and a release address that is no URL', () => {
    expect(refusal('placement:\n  ports: 30000-20000\n').message).toMatch(
      /:2: placement\.ports: a range within 1024-65535, FIRST no more than LAST/,
    );
    expect(refusal('agent:\n  engines:\n    llamacpp:\n      release_url: ftp://mirror\n').message).toMatch(
      /:4: agent\.engines\.llamacpp\.release_url: an http\(s\) address/,
    );
    expect(refusal('agent:\n  engines:\n    llamacpp:\n      build: latest\n').message).toMatch(
      /:4: agent\.engines\.llamacpp\.build: a llama\.cpp release tag such as b10587/,
    );
  });

  it('bounds the connections of one client address, 512 unless set, and refuses a bound it cannot use', () => {
    expect(load(undefined).settings.gateway.max_connections_per_client).toBe(512);
    expect(
      load('gateway:\n  max_connections_per_client: 2000\n').settings.gateway.max_connections_per_client,
    ).toBe(2000);
    expect(refusal('gateway:\n  max_connections_per_client: 0\n').message).toMatch(
      /:2: gateway\.max_connections_per_client: at least 1 connection, e\.g\. 512/,
    );
    expect(refusal('gateway:\n  max_connections_per_client: many\n').message).toMatch(
      /:2: gateway\.max_connections_per_client: a whole number of connections, e\.g\. 512/,
    );
  });

  it('reads the hub, the mirror and the node cache bound; the mirror under the data dir unless set', () => {
    const d = load(undefined);
    expect(d.settings.hub).toEqual({});
    expect(d.settings.mirror).toEqual({ enabled: true, dir: join(d.settings.data_dir, 'mirror') });
    expect(d.settings.agent.models).toEqual({});
    const { settings } = load(
      [
        'hub:',
        '  endpoint: https://hf-mirror.example',
        '  token: hf_file_token_0123456789',
        'mirror: {enabled: false, dir: ./cache}',
        'agent: {models: {max_gb: 250.5}}',
      ].join('\n'),
    );
    expect(settings.hub).toEqual({
      endpoint: 'https://hf-mirror.example',
      token: 'hf_file_token_0123456789',
    });
    expect(settings.mirror.enabled).toBe(false);
    expect(settings.mirror.dir).toMatch(/^\/.*\/cache$/);
    expect(settings.agent.models.max_gb).toBe(250.5);
  });

  it('takes the hub, the mirror and the cache bound from the environment too', () => {
    const { settings, source } = load('hub:\n  token: hf_in_the_file_000000\n', {
      LLMGW_HUB_TOKEN: 'hf_from_the_env_111111',
      LLMGW_HUB_ENDPOINT: 'http://127.0.0.1:9',
      LLMGW_MIRROR_ENABLED: 'false',
      LLMGW_MIRROR_DIR: '/srv/mirror',
      LLMGW_AGENT_MODELS_MAX_GB: '100',
    });
    expect(settings.hub).toEqual({ endpoint: 'http://127.0.0.1:9', token: 'hf_from_the_env_111111' });
    expect(settings.mirror).toEqual({ enabled: false, dir: '/srv/mirror' });
    expect(settings.agent.models.max_gb).toBe(100);
    expect(source.fromEnv).toEqual(
      expect.arrayContaining([
        'hub.token',
        'hub.endpoint',
        'mirror.enabled',
        'mirror.dir',
        'agent.models.max_gb',
      ]),
    );
  });

  it('refuses a hub address that is not http(s), and a cache bound under 1 GB', () => {
    expect(refusal('hub:\n  endpoint: ftp://hub\n').message).toMatch(
      /:2: hub\.endpoint: an http\(s\) address, e\.g\. https:\/\/huggingface\.co/,
    );
    expect(refusal('agent:\n  models:\n    max_gb: 0.5\n').message).toMatch(
      /:3: agent\.models\.max_gb: at least 1 GB/,
    );
    expect(refusal('hub:\n  token: ""\n').message).toMatch(/:2: hub\.token: a token such as hf_\.\.\./);
  });

  it('refuses a model declared twice', () => {
    const m = '  - {name: a, source: /a, profiles: [{name: c, engine: llamacpp, cpu: true}]}';
    expect(refusal(`models:\n${m}\n${m}\n`).message).toMatch(
      /:3: models\[1\]\.name: model "a" is declared twice/,
    );
  });
});

describe('what a new settings file changes', () => {
  it('applies models, agents, placement and the hub at once, and names what waits for a restart', async () => {
    const { diffSettings } = await import('./write.js');
    const { parseSettings } = await import('./load.js');
    const d = dir();
    const at = (text: string) =>
      parseSettings(text, { path: join(d, 'llmgw.yaml'), env: {}, cwd: d }).settings;
    const before = at('listen: 127.0.0.1:8080\n');
    const after = at(
      'listen: 127.0.0.1:9090\nplacement: {node_lost_after_s: 30}\ngateway: {retries: 0}\nagent: {heartbeat_ms: 1000}\nhub: {token: hf_x}\nmirror: {enabled: false}\n',
    );
    expect(diffSettings(before, after)).toEqual({
      applied: ['agent', 'placement', 'hub'],
      restartRequired: ['listen', 'gateway', 'mirror'],
    });
    expect(diffSettings(before, before)).toEqual({ applied: [], restartRequired: [] });
    // The cluster's client and informers are made at start.
    expect(diffSettings(before, at('kubernetes: {namespace: ai}\n')).restartRequired).toEqual(['kubernetes']);
  });
});
