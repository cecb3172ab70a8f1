import { describe, expect, it } from 'vitest';
import { isMap, isPair, isSeq, parseDocument, stringify } from 'yaml';

import { maxAliasValues, maxYamlDepth, yamlNestingProblem } from './yaml-bounds.js';
import { parseYamlText, yamlValue } from './yaml-error.js';

/** `depth` mappings, each indented under the one before. */
const indented = (depth: number) =>
  Array.from({ length: depth }, (_, i) => `${'  '.repeat(i)}k${i}:`).join('\n') + ' x\n';

/** A mapping holding a list at its own indentation, whose item is such a mapping, `pairs` times: 1 + 2 × pairs levels. */
const listsAtKeys = (pairs: number) =>
  `a:\n${Array.from({ length: pairs }, (_, i) => `${'  '.repeat(i)}- a:`).join('\n')} x\n`;

/** The classic bomb: nine anchors, each a list of nine aliases of the one before (9^9 values). */
const bomb = [
  'a: &a [x, x, x, x, x, x, x, x, x]',
  ...'bcdefghi'.split('').map((n, i) => `${n}: &${n} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(', ')}]`),
].join('\n');

describe('nesting, measured before anything is parsed', () => {
  const m = maxYamlDepth;
  // Each case: one level past the bound, with the line and column of the level that passed it.
  const refused: [string, string, number, number][] = [
    ['flow lists under a key', `models: ${'['.repeat(m)}${']'.repeat(m)}`, 1, 8 + m],
    ['flow mappings', `${'{a: '.repeat(m + 1)}1${'}'.repeat(m + 1)}`, 1, 1 + 4 * m],
    ['compact block lists under a key', `models:\n${'- '.repeat(m)}x`, 2, 1 + 2 * (m - 1)],
    ['indented mappings', indented(m + 1), m + 1, 1 + 2 * m],
    ['lists at their keys’ indentation', listsAtKeys(m / 2), m / 2 + 1, m + 1],
    ['block, then flow', `a:\n  b:\n    c: ${'['.repeat(m - 2)}`, 3, 8 + m - 3],
  ];
  it.each(refused)('refuses %s one level past the bound, saying where', (_name, text, line, column) => {
    expect(yamlNestingProblem(text)).toEqual({
      line,
      column,
      message: `nests lists and mappings more than 64 levels deep at column ${column}: no llmgw document needs that; flatten it`,
    });
  });

  it.each([
    ['flow lists under a key', `models: ${'['.repeat(m - 1)}${']'.repeat(m - 1)}`],
    ['flow mappings', `${'{a: '.repeat(m)}1${'}'.repeat(m)}`],
    ['compact block lists under a key', `models:\n${'- '.repeat(m - 1)}x`],
    ['indented mappings', indented(m)],
    ['lists at their keys’ indentation', listsAtKeys(m / 2 - 1)],
  ])('takes %s at the bound, as the parser does', (_name, text) => {
    expect(yamlNestingProblem(text)).toBeUndefined();
    expect(parseYamlText(text).errors).toEqual([]);
  });

  it('counts no bracket or dash that is text: quoted, plain, in a block scalar or a comment', () => {
    const many = '['.repeat(500);
    const text = [
      `a: "${many}"`,
      `b: '${many} it''s'`,
      `c: x${many}`,
      `d: |`,
      `  ${many}`,
      `  ${'- '.repeat(500)}`,
      `e: - not a list - ${many}`,
      `# ${many}`,
      `f: [ "${many}", '${many}' ]`,
      `g: -`,
    ].join('\n');
    expect(yamlNestingProblem(text)).toBeUndefined();
  });

  it('reads a sibling after a deep branch at its own level', () => {
    const branch = (n: number) => Array.from({ length: n }, (_, i) => `${'  '.repeat(i + 1)}k:`).join('\n');
    const text = `a:\n${branch(40)} x\nb:\n${branch(40)} x\n`;
    expect(yamlNestingProblem(text)).toBeUndefined();
  });

  it.each([
    ['a key after its sibling’s list at the same column', 'k0:\n- y\nk1: y\n', 2],
    ['a key after a block scalar', 'k0:\n  k0: |-\n    multi\n    line\n  k1:\n    k0: y\n', 3],
    ['a key after a plain scalar over two lines', 'a: b\n  c\nd:\n  e: f\n', 2],
  ])('measures %s as the parser nests it', (_name, text, depth) => {
    expect([yamlNestingProblem(text, depth), yamlNestingProblem(text, depth - 1)?.line]).toEqual([
      undefined,
      expect.any(Number),
    ]);
  });

  it('measures what the parser nests, in every style a YAML writer uses', () => {
    // Seeded: the same 700 documents each run, of lists, mappings and awkward scalars.
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const scalars = ['x', '- a', '[b', 'c: d', "it's", '#no', '', 'multi\nline', 'trail\n', 12, null, '? q'];
    const value = (d: number): unknown => {
      const r = random();
      if (d > 10 || r < 0.25) return scalars[Math.floor(random() * scalars.length)];
      if (r < 0.6) return Array.from({ length: 1 + Math.floor(random() * 3) }, () => value(d + 1));
      return Object.fromEntries(
        Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => [`k${i}`, value(d + 1)]),
      );
    };
    const nesting = (n: unknown): number => {
      if (isMap(n) || isSeq(n)) return 1 + Math.max(0, ...n.items.map(nesting));
      return isPair(n) ? Math.max(nesting(n.key), nesting(n.value)) : 0;
    };
    const styles = [
      {},
      { collectionStyle: 'flow' as const },
      { indentSeq: false },
      { indent: 4 },
      { blockQuote: 'folded' as const, lineWidth: 20 },
      { indent: 1, indentSeq: false },
      { blockQuote: 'literal' as const },
    ];
    const wrong: string[] = [];
    for (let i = 0; i < 700; i++) {
      const text = stringify(value(0), styles[i % styles.length]);
      const depth = nesting(parseDocument(text).contents);
      if (
        yamlNestingProblem(text, depth) !== undefined ||
        (depth > 0 && yamlNestingProblem(text, depth - 1) === undefined)
      )
        wrong.push(text);
    }
    expect(wrong).toEqual([]);
  });

  it('stops at the first level past the bound of a 1 MB document nested 100,000 deep', () => {
    const text = `models: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n#${' '.repeat(800_000)}`;
    expect(yamlNestingProblem(text)?.column).toBe(8 + maxYamlDepth);
    expect(parseYamlText(text).errors.map((e) => [e.line, e.bound])).toEqual([[1, true]]);
  });
});

describe('aliases, checked before a value is built', () => {
  it('refuses the alias bomb at the alias that repeats past the bound, in words', () => {
    const { errors } = parseYamlText(bomb);
    expect(errors).toEqual([
      {
        // a: 10 values; b: 9 × 10 + 1; c: 9 × 91 + 1; d: 9 × 820 + 1 = 7381. The aliases of b, c and
        // d repeat 8289 values; e's first *d takes them past 10,000.
        line: 5,
        column: 8,
        bound: true,
        message: `aliases repeat more than ${maxAliasValues} values by the alias *d: each alias stands for its anchor's whole value, and aliases of aliases multiply; write the values out`,
        frame: expect.stringContaining('5 | e: &e [*d, *d'),
      },
    ]);
  });

  it('refuses an alias with no anchor before it, and one inside its own anchor', () => {
    expect(parseYamlText('a: *nope\nb: &nope 1\n').errors).toEqual([
      expect.objectContaining({
        line: 1,
        column: 4,
        message:
          'the alias *nope names no anchor before it: put &nope on the value it stands for, above the alias',
      }),
    ]);
    expect(parseYamlText('a: 1\nb: &x [1, {c: *x}]\n').errors).toEqual([
      expect.objectContaining({
        line: 2,
        column: 15,
        message:
          'the alias *x is inside the value &x it stands for, which would then hold itself: write the value out',
      }),
    ]);
  });

  it('takes aliases that repeat a profile many times, the last anchor of a name winning', () => {
    const text = [
      'cpu: &p {name: cpu, engine: llamacpp, cpu: true, args: [-t, "8"]}',
      'models:',
      ...Array.from({ length: 300 }, (_, i) => `  - {name: m${i}, source: /m${i}.gguf, profiles: [*p]}`),
      'other: &p 1',
      'last: *p',
    ].join('\n');
    const { doc, errors } = parseYamlText(text);
    expect(errors).toEqual([]);
    const value = yamlValue(doc) as { models: { profiles: unknown[] }[]; last: unknown };
    expect(value.models[299]?.profiles[0]).toMatchObject({ name: 'cpu' });
    expect(value.last).toBe(1);
  });
});
