import { describe, expect, it } from 'vitest';

import { formatPreamble, parsePreamble } from './relay-preamble.js';

describe('relay preamble', () => {
  it.each([
    ['127.0.0.1', false],
    ['::1', true],
    ['::ffff:10.0.0.7', false],
  ])('carries %s (tls %s) and reads it back', (address, tls) => {
    const line = formatPreamble({ address, tls });
    expect(line.endsWith('\n')).toBe(true);
    expect(parsePreamble(line.slice(0, -1))).toEqual({ address, tls });
  });

  it.each([
    ['GET / HTTP/1.1'],
    ['LLMGW-RELAY/1 127.0.0.1'],
    ['LLMGW-RELAY/2 127.0.0.1 tls'],
    ['LLMGW-RELAY/1 evil\r\nhost tls'],
    ['LLMGW-RELAY/1 127.0.0.1 maybe'],
    ['LLMGW-RELAY/1  plain'],
  ])('refuses %j', (line) => {
    expect(parsePreamble(line)).toBeUndefined();
  });
});
