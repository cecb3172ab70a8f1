import { describe, expect, it } from 'vitest';

import { parseSettings } from './load.js';
import { hiddenSecret, hideSecrets, restoreSecrets, withoutSecrets } from './secret-text.js';

const token = 'hf_abcdefghijklmnopqrstuvwxyz012345';

describe('hub.token in the settings text the API shows', () => {
  const forms: [string, string][] = [
    ['a plain scalar', `listen: 127.0.0.1:0\nhub:\n  token: ${token}\n  endpoint: http://h\n`],
    [
      'a quoted scalar in a flow mapping',
      `hub: {token: "${token}", endpoint: http://h}\nlisten: 127.0.0.1:0\n`,
    ],
    ['a literal block', `hub:\n  token: |-\n    ${token}\nlisten: 127.0.0.1:0\n`],
  ];

  it.each(forms)('is hidden when written as %s, and put back when the placeholder comes back', (_f, text) => {
    const shown = hideSecrets(text);
    expect(shown).not.toContain(token);
    expect(shown).toContain(hiddenSecret);
    // The shown text is valid settings as it is, and the rest of the file is untouched.
    const read = parseSettings(shown, { path: 'x.yaml', env: {}, cwd: '/' });
    expect(read.settings.hub.token).toBe(hiddenSecret);
    expect(read.settings.listen).toBe('127.0.0.1:0');
    // Unchanged: the very text of the file, byte for byte (an unchanged edit changes nothing).
    expect(restoreSecrets(shown, text)).toBe(text);
    // Another key edited: the token is kept, the edit applied.
    const edited = restoreSecrets(shown.replace('127.0.0.1:0', '127.0.0.1:9'), text);
    const after = parseSettings(edited, { path: 'x.yaml', env: {}, cwd: '/' }).settings;
    expect(after.hub.token).toBe(token);
    expect(after.listen).toBe('127.0.0.1:9');
  });

  it('is hidden where repeated (a comment), and the value is kept', () => {
    const text = `hub:\n  token: '${token}' # was ${token}\nlisten: 127.0.0.1:0\n`;
    const shown = hideSecrets(text);
    expect(shown).toBe(`hub:\n  token: ${hiddenSecret} # was ${hiddenSecret}\nlisten: 127.0.0.1:0\n`);
    expect(restoreSecrets(shown, text)).toBe(
      `hub:\n  token: '${token}' # was ${hiddenSecret}\nlisten: 127.0.0.1:0\n`,
    );
  });

  it('takes a new token written over the placeholder, and a removed key removes it', () => {
    const text = `hub:\n  token: ${token}\n`;
    const shown = hideSecrets(text);
    expect(restoreSecrets(shown.replace(hiddenSecret, 'hf_new_token_value'), text)).toBe(
      'hub:\n  token: hf_new_token_value\n',
    );
    expect(restoreSecrets('hub: {}\n', text)).toBe('hub: {}\n');
  });

  it('refuses the placeholder where the file holds no token, saying what to write', () => {
    expect(() => restoreSecrets(`hub:\n  token: ${hiddenSecret}\n`, 'listen: 127.0.0.1:0\n')).toThrow(
      'hub.token is "(hidden)", which stands for the token the settings file holds, but it holds none: write the token itself, or remove hub.token',
    );
  });

  it('leaves text without a token, and text that is not YAML, as they are', () => {
    expect(hideSecrets('listen: 127.0.0.1:0\n')).toBe('listen: 127.0.0.1:0\n');
    expect(restoreSecrets('listen: [\n', `hub: {token: ${token}}`)).toBe('listen: [\n');
  });

  it('is replaced by a short digest in what the audit log records', () => {
    const { settings } = parseSettings(`hub: {token: ${token}}\n`, { path: 'x.yaml', env: {}, cwd: '/' });
    const audited = JSON.stringify(withoutSecrets(settings));
    expect(audited).not.toContain(token);
    expect(audited).toMatch(/"token":"\(set, sha256 [0-9a-f]{8}\)"/);
    expect(settings.hub.token).toBe(token);
  });
});
