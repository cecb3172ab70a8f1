import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { validateModel } from '../../catalog/validate.js';
import { engines } from '../../engines/registry.js';
import { parseSettings } from '../../config/load.js';

import { readDefinition } from './models.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const examples = readdirSync(join(root, 'examples')).filter((f) => f.endsWith('.yaml'));

describe('the example models under examples/', () => {
  it('are there: a llama.cpp GGUF model on GPU and CPU profiles, a vLLM model with tp, a MIG profile', () => {
    const specs = examples.map(
      (f) =>
        readDefinition(join(root, 'examples', f)) as {
          profiles: { engine: string; cpu?: boolean; gpu_class?: string; tp?: number }[];
        },
    );
    const profiles = specs.flatMap((s) => s.profiles);
    expect(
      specs.some(
        (s) =>
          s.profiles.some((p) => p.engine === 'llamacpp' && p.cpu === true) &&
          s.profiles.some((p) => p.engine === 'llamacpp' && p.gpu_class !== undefined),
      ),
    ).toBe(true);
    expect(profiles.some((p) => p.engine === 'vllm' && (p.tp ?? 1) > 1)).toBe(true);
    expect(profiles.some((p) => p.gpu_class?.includes('-mig-') === true)).toBe(true);
  });

  it.each(examples)('%s passes the validation of llmgw ctl model add -f', (file) => {
    const r = validateModel(readDefinition(join(root, 'examples', file)), engines);
    expect(r.ok ? [] : r.issues).toEqual([]);
  });

  it('are the files the README and docs name', () => {
    const named = [
      'README.md',
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => join('docs', f)),
    ].flatMap((f) =>
      [...readFileSync(join(root, f), 'utf8').matchAll(/examples\/([\w.-]+\.yaml)/g)].map((m) => m[1]),
    );
    expect(named.length).toBeGreaterThan(0);
    for (const f of named) expect(examples).toContain(f);
  });
});

describe("the README's settings example", () => {
  it('is valid settings', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const block = /## Settings[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const loaded = parseSettings(block ?? '', { path: 'README.md', env: {}, cwd: root });
    expect(loaded.settings.gateway.max_connections_per_client).toBe(512);
    expect(loaded.settings.models.map((m) => m.name)).toEqual(['qwen-0-5b']);
  });
});
