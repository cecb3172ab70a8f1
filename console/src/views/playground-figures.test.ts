import { describe, expect, it } from 'vitest';

import { answerFigures, figuresLine, formatMs, formatRate, type AnswerTiming } from './playground-figures.js';

describe('answerFigures', () => {
  it.each<[string, AnswerTiming, ReturnType<typeof answerFigures>]>([
    ['nothing came yet', { sentAt: 100, pieces: 0 }, { tokens: 0, counted: 'pieces' }],
    [
      'first text came, still answering',
      { sentAt: 100, firstTextAt: 350, pieces: 3 },
      { ttftMs: 250, tokens: 3, counted: 'pieces' },
    ],
    [
      'ended, counted by the engine: 11 tokens after the first in 500 ms',
      { sentAt: 0, firstTextAt: 200, endedAt: 700, pieces: 9, completionTokens: 12 },
      { ttftMs: 200, tokens: 12, counted: 'usage', tokensPerS: 22 },
    ],
    [
      'ended without usage: the pieces are the count',
      { sentAt: 0, firstTextAt: 100, endedAt: 1100, pieces: 5 },
      { ttftMs: 100, tokens: 5, counted: 'pieces', tokensPerS: 4 },
    ],
    [
      'one token: no rate (no time after the first)',
      { sentAt: 0, firstTextAt: 80, endedAt: 90, pieces: 1, completionTokens: 1 },
      { ttftMs: 80, tokens: 1, counted: 'usage' },
    ],
    [
      'all the text in one read: no rate rather than an infinite one',
      { sentAt: 0, firstTextAt: 80, endedAt: 80, pieces: 1, completionTokens: 40 },
      { ttftMs: 80, tokens: 40, counted: 'usage' },
    ],
    [
      'stopped before any text: no figures but the count',
      { sentAt: 0, endedAt: 900, pieces: 0 },
      { tokens: 0, counted: 'pieces' },
    ],
  ])('%s', (_name, timing, figures) => {
    expect(answerFigures(timing)).toEqual(figures);
  });
});

describe('formatting', () => {
  it.each([
    [0.4, '0 ms'],
    [999.4, '999 ms'],
    [1000, '1.00 s'],
    [12_345, '12.35 s'],
  ])('formatMs(%s) = %s', (ms, text) => {
    expect(formatMs(ms)).toBe(text);
  });

  it.each([
    [4, '4.00 tokens/s'],
    [22.04, '22.0 tokens/s'],
    [99.96, '100 tokens/s'],
    [1234.5, '1235 tokens/s'],
  ])('formatRate(%s) = %s', (r, text) => {
    expect(formatRate(r)).toBe(text);
  });

  it.each<[ReturnType<typeof answerFigures>, string]>([
    [
      { ttftMs: 200, tokens: 12, counted: 'usage', tokensPerS: 22 },
      'time to first token 200 ms · 22.0 tokens/s · 12 tokens',
    ],
    [{ ttftMs: 80, tokens: 1, counted: 'pieces' }, 'time to first token 80 ms · 1 token (counted)'],
    [{ tokens: 0, counted: 'pieces' }, '0 tokens (counted)'],
  ])('figuresLine %#', (f, text) => {
    expect(figuresLine(f)).toBe(text);
  });
});
