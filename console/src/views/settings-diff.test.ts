import { describe, expect, it } from 'vitest';

import { diffCounts, diffHunks, issueLines, lineDiff, lineRange } from './settings-diff.js';

describe('lineDiff', () => {
  it.each([
    ['a\nb\nc', 'a\nb\nc', ' a| b| c'],
    ['a\nb\nc', 'a\nB\nc', ' a|-b|+B| c'],
    ['a\nc', 'a\nb\nc', ' a|+b| c'],
    ['a\nb\nc', 'a\nc', ' a|-b| c'],
    ['', 'x: 1', '-|+x: 1'],
  ])('%j -> %j', (before, after, want) => {
    const sign = { same: ' ', added: '+', removed: '-' } as const;
    expect(
      lineDiff(before, after)
        .map((d) => sign[d.kind] + d.text)
        .join('|'),
    ).toBe(want);
  });

  it("numbers lines by the edited text, removed ones by the old text's", () => {
    expect(lineDiff('a\nb', 'a\nc')).toEqual([
      { kind: 'same', text: 'a', line: 1 },
      { kind: 'removed', text: 'b', line: 2 },
      { kind: 'added', text: 'c', line: 2 },
    ]);
  });
});

describe('diffHunks and diffCounts', () => {
  it('keeps changes with their context and marks the gaps between hunks', () => {
    const before = ['1', '2', '3', '4', '5', '6', '7', '8', '9'].join('\n');
    const after = ['1', 'two', '3', '4', '5', '6', '7', '8', 'nine'].join('\n');
    const diff = lineDiff(before, after);
    expect(diffHunks(diff, 1).map((d) => (d === null ? '…' : d.text))).toEqual([
      '1',
      '2',
      'two',
      '3',
      '…',
      '8',
      '9',
      'nine',
    ]);
    expect(diffCounts(diff)).toEqual({ added: 2, removed: 2 });
  });

  it('is empty for no change', () => {
    expect(diffHunks(lineDiff('a\nb', 'a\nb'))).toEqual([]);
  });
});

describe('issueLines', () => {
  it("lists each issue's line once, in order, leaving out issues without one", () => {
    expect(issueLines([{ line: 7 }, {}, { line: 2 }, { line: 7 }])).toEqual([2, 7]);
  });
});

describe('lineRange', () => {
  it.each([
    ['a\nbc\nd', 1, { start: 0, end: 1 }],
    ['a\nbc\nd', 2, { start: 2, end: 4 }],
    ['a\nbc\nd', 3, { start: 5, end: 6 }],
    ['a\nbc\nd', 9, { start: 6, end: 6 }],
  ])('%j line %i', (text, line, want) => {
    expect(lineRange(text, line)).toEqual(want);
  });
});
