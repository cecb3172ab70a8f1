import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { SettingsError } from './load.js';
import { parseWrittenSettings } from './parse-written.js';

function write(text: string, env: Record<string, string>) {
  const cwd = mkdtempSync(join(tmpdir(), 'llmgw-written-'));
  const path = join(cwd, 'config.yaml');
  return { path, run: () => parseWrittenSettings(text, { path, env, cwd }) };
}

function refusal(text: string, env: Record<string, string>): { path: string; message: string } {
  const w = write(text, env);
  try {
    w.run();
  } catch (e) {
    if (e instanceof SettingsError) return { path: w.path, message: e.message };
    throw e;
  }
  throw new Error('expected the settings to be refused');
}

const listenWords = 'expected HOST:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:8080 (every interface) or [::1]:8080';

describe('settings about to be written', () => {
  it('are refused when the file alone would not start, though the environment covers it now', () => {
    const { path, message } = refusal('listen: 127.0.0.1:99999\n', {
      LLMGW_LISTEN: '127.0.0.1:0',
      LLMGW_PLACEMENT_PORTS: '20000-20100',
      HF_ENDPOINT: 'http://127.0.0.1:9',
    });
    expect(message).toBe(
      `invalid settings, nothing was applied; the file on its own, as a start without LLMGW_LISTEN, LLMGW_PLACEMENT_PORTS reads it:\n${path}:1: listen: ${listenWords}`,
    );
  });

  it('are refused as they run now, saying so, where the environment makes them wrong', () => {
    // The file drops tls.cert, which made the environment's tls.key whole.
    const { path, message } = refusal('listen: 127.0.0.1:0\n', { LLMGW_TLS_KEY: '/srv/tls/key.pem' });
    expect(message).toBe(
      `invalid settings, nothing was applied; as this control plane runs it, with LLMGW_TLS_KEY from its environment:\n${path}:1: tls.cert: tls.key is set without tls.cert: give both tls.cert and tls.key (PEM files), or neither to use the cluster's own CA`,
    );
  });

  it('are refused without a word of readings where the file itself is wrong', () => {
    const { path, message } = refusal('listen: 127.0.0.1:99999\nlisten: twice\n', {
      LLMGW_LISTEN: '127.0.0.1:0',
    });
    expect(message).toMatch(
      new RegExp(
        `^invalid settings, nothing was applied:\\n${path}:2: not valid YAML at column 1: Map keys must be unique\\n`,
      ),
    );
  });

  it('are refused in one reading with no variable to leave out', () => {
    const { path, message } = refusal('listen: 127.0.0.1:99999\n', {});
    expect(message).toBe(`invalid settings, nothing was applied:\n${path}:1: listen: ${listenWords}`);
  });

  it('are taken as they run now when both readings hold', () => {
    const { settings, source } = write('listen: 127.0.0.1:8081\n', { LLMGW_LISTEN: '127.0.0.1:0' }).run();
    expect(settings.listen).toBe('127.0.0.1:0');
    expect(source.fromEnv).toEqual(['listen']);
  });
});
