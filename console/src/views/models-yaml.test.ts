import { describe, expect, it } from 'vitest';

import { parseModelYaml, pathParts, placeIssues } from './models-yaml.js';

const text = `name: qwen
source: hf://Qwen/Qwen2.5-7B-Instruct
profiles:
  - name: l4
    engine: vllm
    gpu_class: l4-24
  - name: cpu
    engine: llamacpp
`;

describe('parseModelYaml', () => {
  it.each([
    ['a mapping', 'name: a\nreplicas: 2\n', { ok: true, value: { name: 'a', replicas: 2 } }],
    ['nothing', '  \n', { ok: false, message: 'write the model definition (YAML) first' }],
    [
      'a list, not a mapping',
      '- a\n- b\n',
      {
        ok: false,
        message:
          'a model definition is a mapping (name:, source:, profiles:), as llmgw ctl model add -f takes it',
        line: 1,
      },
    ],
  ])('%s', (_what, input, want) => {
    expect(parseModelYaml(input)).toEqual(want);
  });

  it('says the line of a syntax error', () => {
    const r = parseModelYaml('name: a\nsource: b\nprofiles:\n  - name: x\n   engine: vllm\n');
    expect(r.ok).toBe(false);
    expect(r.ok ? undefined : r.line).toBe(5);
  });
});

describe('pathParts', () => {
  it.each([
    ['profiles[0].gpu_class', ['profiles', 0, 'gpu_class']],
    ['name', ['name']],
    ['profiles[12].adapters[1].source', ['profiles', 12, 'adapters', 1, 'source']],
    ['', []],
  ])('%s', (path, want) => {
    expect(pathParts(path)).toEqual(want);
  });
});

describe('placeIssues', () => {
  it.each([
    ['a field of a profile', 'profiles[0].gpu_class', 6],
    ['the second profile', 'profiles[1].engine', 8],
    ['a top-level field', 'source', 2],
    ['a field the text lacks: its profile', 'profiles[1].gpu_class', 7],
    ['a field the text lacks at the top: the document', 'replicas', 1],
    ['the whole model', '', 1],
  ])('%s', (_what, path, line) => {
    expect(placeIssues(text, [{ path, message: 'm' }])).toEqual([{ path, message: 'm', line }]);
  });

  it('places nothing in text that does not parse', () => {
    expect(placeIssues('a: [', [{ path: 'a', message: 'm' }])).toEqual([{ path: 'a', message: 'm' }]);
  });
});
