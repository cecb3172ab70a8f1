import { describe, expect, it } from 'vitest';

import { createLogger } from './logger.js';
import { fieldWords, visible } from './pretty-log.js';

/** A logger of `format` whose lines are kept instead of written to standard output. */
function capture(format: 'json' | 'pretty') {
  const lines: string[] = [];
  const logger = createLogger(
    'llmgw-up',
    { LLMGW_LOG_FORMAT: format },
    { destination: { write: (s: string) => void lines.push(s) } },
  );
  return { logger, lines };
}

const key = 'llmgw_key_0123456789abcdefghij';
const join = 'llmgw_join_0123456789abcdefghij';

describe('createLogger, pretty', () => {
  it('writes time, level, component, message and fields on one line, with no JSON', () => {
    const { logger, lines } = capture('pretty');
    logger.info({ url: 'http://127.0.0.1:8080', store: 'sqlite' }, 'control plane listening');
    logger.warn({ workers: [41, 42], why: 'two words' }, 'slow');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^\d\d:\d\d:\d\d INFO {2}llmgw-up: control plane listening {2}url=http:\/\/127\.0\.0\.1:8080 store=sqlite\n$/,
    );
    expect(lines[1]).toMatch(/^\d\d:\d\d:\d\d WARN {2}llmgw-up: slow {2}workers=41,42 why="two words"\n$/);
    for (const l of lines) expect(l).not.toMatch(/[{}]/);
  });

  it('keeps the level: a debug line is not written at info', () => {
    const { logger, lines } = capture('pretty');
    logger.debug('hidden');
    logger.error({ err: 'Error: boom\n    at f (a.js:1:2)' }, 'failed');
    expect(lines).toEqual([
      expect.stringMatching(/ ERROR llmgw-up: failed {2}err="Error: boom"\n {4}at f \(a\.js:1:2\)\n$/),
    ]);
  });

  it('scrubs secrets as the JSON lines do: token fields, and keys in the message and in field text', () => {
    for (const format of ['pretty', 'json'] as const) {
      const { logger, lines } = capture(format);
      logger.info(
        { token: join, err: `postgres://u:hunter2@db/x refused`, agent: { token: 'plain-secret' } },
        `joined with ${key}`,
      );
      const out = lines.join('');
      expect(out, format).not.toContain('0123456789abcdefghij');
      expect(out, format).not.toContain('hunter2');
      expect(out, format).not.toContain('plain-secret');
      expect(out, format).toContain('llmgw_key_[redacted]');
      expect(out, format).toContain('llmgw_join_[redacted]');
    }
  });

  it('shows control characters a client sent as escapes', () => {
    const { logger, lines } = capture('pretty');
    logger.info({ model: 'a\u001b[2Jb' }, 'odd \u001b]0;title\u0007 name');
    expect(lines[0]).not.toContain('\u001b');
    expect(lines[0]).toContain('odd \\u001b]0;title\\u0007 name');
    expect(lines[0]).toContain('model="a\\u001b[2Jb"');
  });
});

describe('createLogger, json', () => {
  it('writes one JSON object a line, with the component', () => {
    const { logger, lines } = capture('json');
    logger.info({ url: 'http://x' }, 'control plane listening');
    expect(JSON.parse(lines[0] ?? '')).toMatchObject({
      level: 'info',
      component: 'llmgw-up',
      url: 'http://x',
      msg: 'control plane listening',
    });
  });

  it('refuses a format it does not know, naming the variable', () => {
    expect(() => createLogger('x', { LLMGW_LOG_FORMAT: 'text' })).toThrow(
      'LLMGW_LOG_FORMAT=text is not a log format: set it to json or pretty, or unset it',
    );
  });
});

describe('fieldWords', () => {
  it.each([
    { log: { a: 1, b: true, c: null }, words: ['a=1', 'b=true', 'c=null'] },
    {
      log: { s: 'x y', t: 'a=b', u: '', q: 'say "hi"' },
      words: ['s="x y"', 't="a=b"', 'u=""', 'q="say \\"hi\\""'],
    },
    { log: { nested: { a: { b: 2 } }, list: ['x', 3] }, words: ['nested.a.b=2', 'list=x,3'] },
    { log: { rows: [{ a: 1 }] }, words: ['rows=[{"a":1}]'] },
    { log: { time: 't', level: 'info', component: 'c', msg: 'm', gone: undefined }, words: [] },
  ])('$log', ({ log, words }) => {
    expect(fieldWords(log).words).toEqual(words);
  });

  it('escapes control characters', () => {
    expect(visible('a\u0000b\u009bc\td')).toBe('a\\u0000b\\u009bc\\u0009d');
  });
});
