import { describe, expect, it } from 'vitest';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch } from './patch.js';
import { parseQuantity } from './quantity.js';
import { RESOURCES } from './resources.js';
import { fitError } from './scheduler.js';
import { matchRequirements, parseFieldSelector, parseLabelSelector } from './selectors.js';

const pods = RESOURCES.find((r) => r.kind === 'Pod')!;

describe('label selectors', () => {
  it.each<[string, Record<string, string>, boolean]>([
    ['app=llm', { app: 'llm' }, true],
    ['app==llm,tier!=db', { app: 'llm', tier: 'web' }, true],
    ['app!=llm', {}, true],
    ['env in (prod, staging),gpu', { env: 'prod', gpu: '' }, true],
    ['env notin (prod)', { env: 'prod' }, false],
    ['!gpu', { gpu: 'x' }, false],
    ['gpu', {}, false],
  ])('%s on %j is %s', (sel, labels, want) => {
    expect(matchRequirements(parseLabelSelector(sel), labels)).toBe(want);
  });

  it('refuses what it cannot parse, and field labels a kind does not have', () => {
    expect(() => parseLabelSelector('app=(x')).toThrow('unable to parse requirement: app=(x');
    expect(() => parseFieldSelector('spec.foo=bar', pods)).toThrow('field label not supported: spec.foo');
    expect(() => parseFieldSelector('status.phase', pods)).toThrow(
      "invalid selector: 'status.phase'; can't understand 'status.phase'",
    );
  });
});

describe('patches', () => {
  it('merges (RFC 7386): null deletes, lists are replaced', () => {
    expect(mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1, 2] }, { a: null, b: { c: 5 }, l: [3] })).toEqual({
      b: { c: 5, d: 3 },
      l: [3],
    });
  });

  it('merges strategically: containers by name, env by name, $patch delete', () => {
    const target = {
      spec: {
        containers: [
          { name: 'a', image: 'x:1', env: [{ name: 'K', value: '1' }] },
          { name: 'b', image: 'y:1' },
        ],
      },
    };
    const patch = {
      spec: {
        containers: [
          { name: 'a', image: 'x:2', env: [{ name: 'J', value: '2' }] },
          { name: 'b', $patch: 'delete' },
        ],
      },
    };
    expect(strategicMergePatch(target, patch)).toEqual({
      spec: {
        containers: [
          {
            name: 'a',
            image: 'x:2',
            env: [
              { name: 'K', value: '1' },
              { name: 'J', value: '2' },
            ],
          },
        ],
      },
    });
  });

  it('applies JSON patches (RFC 6902) and refuses what does not apply', () => {
    const doc = { metadata: { labels: { a: 'b' } }, spec: { replicas: 1, l: [1, 2] } };
    expect(
      jsonPatch(doc, [
        { op: 'replace', path: '/spec/replicas', value: 3 },
        { op: 'add', path: '/metadata/labels/llmgw.io~1model', value: 'm' },
        { op: 'add', path: '/spec/l/-', value: 3 },
        { op: 'remove', path: '/spec/l/0' },
        { op: 'test', path: '/spec/replicas', value: 3 },
      ]),
    ).toEqual({ metadata: { labels: { a: 'b', 'llmgw.io/model': 'm' } }, spec: { replicas: 3, l: [2, 3] } });
    expect(() => jsonPatch(doc, [{ op: 'replace', path: '/spec/paused', value: true }])).toThrow(
      new PatchError('replace operation does not apply: doc is missing key: /spec/paused: missing value'),
    );
    expect(() => jsonPatch(doc, [{ op: 'test', path: '/spec/replicas', value: 2 }])).toThrow(
      'testing value failed',
    );
    expect(() => jsonPatch(doc, [{ op: 'frob', path: '/' }])).toThrow('Unexpected kind: frob');
  });
});

describe('quantities and the scheduler message', () => {
  it.each<[string, number | undefined]>([
    ['1', 1],
    ['500m', 0.5],
    ['16Gi', 16 * 2 ** 30],
    ['1.5k', 1500],
    ['1e3', 1000],
    ['32GB', undefined],
    ['', undefined],
  ])('%s is %s', (q, v) => expect(parseQuantity(q)).toBe(v));

  it('counts and sorts reasons as the scheduler does', () => {
    expect(
      fitError([
        ['Insufficient nvidia.com/gpu'],
        ["node(s) didn't match Pod's node affinity/selector"],
        ["node(s) didn't match Pod's node affinity/selector"],
      ]),
    ).toBe(
      "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
    );
    expect(fitError([])).toBe('no nodes available to schedule pods');
  });
});
