import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadSettings, SettingsError } from './load.js';

function load(text: string) {
  const d = mkdtempSync(join(tmpdir(), 'llmgw-kube-'));
  writeFileSync(join(d, 'llmgw.yaml'), text);
  return loadSettings({ path: join(d, 'llmgw.yaml'), env: { LLMGW_DATA_DIR: join(d, 'data') }, cwd: d });
}

function refused(text: string): string {
  try {
    load(text);
  } catch (e) {
    if (e instanceof SettingsError) return e.message;
    throw e;
  }
  throw new Error('expected the settings to be refused');
}

describe('kubernetes.resources', () => {
  it('is unset by default: llmgw counts what each engine needs', () => {
    expect(load('kubernetes: {}\n').settings.kubernetes?.resources).toEqual({ cpu: '', memory: '' });
  });

  it('takes Kubernetes quantities', () => {
    const r = load('kubernetes:\n  resources: {cpu: 500m, memory: 32Gi}\n').settings.kubernetes?.resources;
    expect(r).toEqual({ cpu: '500m', memory: '32Gi' });
  });

  it.each([
    ['cpu: four', 'CPUs, e.g. cpu: "4" or cpu: 500m'],
    ['memory: 32GB', 'bytes, e.g. memory: 32Gi'],
  ])('refuses %s: %s', (line, message) => {
    expect(refused(`kubernetes:\n  resources: {${line}}\n`)).toContain(message);
  });
});
