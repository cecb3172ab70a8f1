import { describe, expect, it } from 'vitest';

import { parseSettings } from '../config/index.js';
import { LlmgwError } from '../core/errors.js';

import { planKeysSecret, settleKeysSecret, type KeyField, type OneSecretApi } from './keys-secret.js';

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const made = (f: KeyField) => `made-${f}-${'x'.repeat(40)}`;
const admin = 'a'.repeat(30);
const engine = 'e'.repeat(40);

describe('planKeysSecret', () => {
  it.each([
    [
      'none there: creates it with both',
      undefined,
      ['adminKey', 'engineKeySecret'],
      {
        kind: 'create',
        data: { 'admin-key': b64(made('adminKey')), 'engine-key-secret': b64(made('engineKeySecret')) },
        values: { adminKey: made('adminKey'), engineKeySecret: made('engineKeySecret') },
      },
    ],
    [
      'both there (the Secret earlier charts made): uses them',
      { 'admin-key': b64(admin), 'engine-key-secret': b64(engine) },
      ['adminKey', 'engineKeySecret'],
      { kind: 'use', values: { adminKey: admin, engineKeySecret: engine } },
    ],
    [
      'one missing: adds it, keeps the rest',
      { 'admin-key': b64(admin), other: b64('kept') },
      ['adminKey', 'engineKeySecret'],
      {
        kind: 'update',
        data: {
          'admin-key': b64(admin),
          other: b64('kept'),
          'engine-key-secret': b64(made('engineKeySecret')),
        },
        values: { adminKey: admin, engineKeySecret: made('engineKeySecret') },
      },
    ],
    [
      'only what is wanted: the admin key from elsewhere is not asked for',
      { 'engine-key-secret': b64(`${engine}\n`) },
      ['engineKeySecret'],
      { kind: 'use', values: { engineKeySecret: engine } },
    ],
    [
      'an empty value counts as missing',
      { 'engine-key-secret': '' },
      ['engineKeySecret'],
      {
        kind: 'update',
        data: { 'engine-key-secret': b64(made('engineKeySecret')) },
        values: { engineKeySecret: made('engineKeySecret') },
      },
    ],
  ] as const)('%s', (_, existing, want, plan) => {
    expect(planKeysSecret({ where: 'ai/demo-llmgw', existing, want, make: made })).toEqual(plan);
  });

  it('makes keys llmgw accepts when not told how', () => {
    const plan = planKeysSecret({
      where: 'ai/x',
      existing: undefined,
      want: ['adminKey', 'engineKeySecret'],
    });
    expect(plan.values.adminKey).toMatch(/^llmgw_key_[A-Za-z0-9]{32}$/);
    expect(plan.values.engineKeySecret).toMatch(/^[0-9a-f]{64}$/);
    const again = planKeysSecret({ where: 'ai/x', existing: undefined, want: ['adminKey'] });
    expect(again.values.adminKey).not.toBe(plan.values.adminKey);
  });

  it.each([
    [
      'admin-key',
      'short',
      'adminKey',
      'the Secret ai/demo-llmgw holds admin-key, but not 24 or more characters without spaces: put one there (openssl rand -hex 24), or remove that key to have llmgw make one',
    ],
    [
      'engine-key-secret',
      `${'e'.repeat(20)} ${'e'.repeat(20)}`,
      'engineKeySecret',
      'the Secret ai/demo-llmgw holds engine-key-secret, but not 32 or more characters without spaces: put one there (openssl rand -hex 32), or remove that key to have llmgw make one',
    ],
  ] as const)('refuses a %s llmgw would not take', (key, value, field, message) => {
    const plan = () =>
      planKeysSecret({ where: 'ai/demo-llmgw', existing: { [key]: b64(value) }, want: [field], make: made });
    expect(plan).toThrow(LlmgwError);
    expect(plan).toThrow(message);
  });
});

describe('kubernetes.keys_secret in the settings', () => {
  const load = (lines: string[]) =>
    parseSettings(['kubernetes:', '  keys_secret:', ...lines].join('\n'), {
      path: '/etc/llmgw/config.yaml',
      env: {},
      cwd: '/',
    }).settings.kubernetes?.keys_secret;

  it('is off unless named; its namespace defaults to kubernetes.namespace (empty here)', () => {
    expect(load(['    name: demo-llmgw'])).toEqual({ name: 'demo-llmgw', namespace: '' });
    expect(
      parseSettings('kubernetes: {}', { path: '/x.yaml', env: {}, cwd: '/' }).settings.kubernetes
        ?.keys_secret,
    ).toEqual({
      name: '',
      namespace: '',
    });
  });

  it.each([
    ['    name: Demo_Keys', 'a Secret name: lower case letters, digits, - and .'],
    ['    namespace: AI', 'a namespace name: lower case letters, digits and -'],
  ])('refuses %s', (line, message) => {
    expect(() => load([line])).toThrow(message);
  });
});

describe('settleKeysSecret', () => {
  const conflict = () =>
    Object.assign(new Error('HTTP-Code: 409'), { code: 409, body: '{"message":"conflict"}' });

  it('reads again after losing a race, and uses what the winner stored', async () => {
    const stored = { 'admin-key': b64(admin), 'engine-key-secret': b64(engine) };
    let reads = 0;
    const api: OneSecretApi = {
      read: () => Promise.resolve(reads++ === 0 ? undefined : { data: stored }),
      create: () => Promise.reject(conflict()),
      replace: () => Promise.reject(new Error('not expected')),
    };
    const keys = await settleKeysSecret(api, {
      namespace: 'ai',
      name: 'demo-llmgw',
      want: ['adminKey', 'engineKeySecret'],
      make: made,
    });
    expect(keys).toEqual({ adminKey: admin, engineKeySecret: engine });
    expect(reads).toBe(2);
  });

  it('gives up, in words, when the Secret changes under every try', async () => {
    let replaces = 0;
    const api: OneSecretApi = {
      read: () => Promise.resolve({ metadata: { resourceVersion: '1' }, data: {} }),
      create: () => Promise.reject(new Error('not expected')),
      replace: () => {
        replaces++;
        return Promise.reject(conflict());
      },
    };
    await expect(
      settleKeysSecret(api, { namespace: 'ai', name: 'demo-llmgw', want: ['engineKeySecret'], make: made }),
    ).rejects.toThrow(
      'the Secret ai/demo-llmgw changed under each of 5 tries to complete it: restart llmgw once the other writer is done',
    );
    expect(replaces).toBe(5);
  });
});
