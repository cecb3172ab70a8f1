import { describe, expect, it } from 'vitest';

import { chatRefusal, llamaParse } from './llama-refusals.mjs';

// The fake llama-server's 500s for requests at fault: the words its JSON library and chat
// parsing would say, which the gateway passes on as the caller's 400.

describe('the fake llama-server reads a body as llama.cpp does', () => {
  it.each([
    [
      'bytes that are not UTF-8',
      Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]),
      /^\[json\.exception\.parse_error\.101\] parse error at line 1, column 7: .*invalid string: ill-formed UTF-8 byte/,
    ],
    [
      'a lone high surrogate',
      Buffer.from('{"a":"\\ud800"}'),
      /invalid string: surrogate U\+D800\.\.U\+DBFF must be followed by U\+DC00\.\.U\+DFFF; last read: '"\\ud800'$/,
    ],
    [
      'a lone low surrogate',
      Buffer.from('{"a":"x\\uDC00"}'),
      /invalid string: surrogate U\+DC00\.\.U\+DFFF must follow U\+D800\.\.U\+DBFF/,
    ],
    [
      'a number past a double',
      Buffer.from('{"max_tokens":1e309}'),
      /^\[json\.exception\.out_of_range\.406\] number overflow parsing '1e309'$/,
    ],
    [
      'text that is not JSON',
      Buffer.from('{"messages": [ {"role": '),
      /^\[json\.exception\.parse_error\.101\] parse error at line 1/,
    ],
  ])('refuses %s', (_what, raw, message) => {
    const { error } = llamaParse(raw);
    expect(error).toMatch(message);
  });

  it('reads pairs, escaped backslashes and big finite numbers', () => {
    expect(llamaParse(Buffer.from('{"a":"\\ud83d\\ude00 \\\\ud800","n":1e308}'))).toEqual({
      body: { a: '😀 \\ud800', n: 1e308 },
    });
  });
});

describe('the fake llama-server renders a chat as llama.cpp does', () => {
  const hi = [{ role: 'user', content: 'hi' }];
  it.each([
    [{ messages: hi, tools: 5 }, "Failed to parse tools: Expected 'tools' to be an array, got 5; tools = 5"],
    [{ messages: hi, tools: [{}] }, 'Failed to parse tools: Missing tool type: {}; tools = [\n  {}\n]'],
    [
      { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] },
      'image input is not supported - hint: if this is unexpected, you may need to provide the mmproj',
    ],
  ])('refuses %j', (body, message) => {
    expect(chatRefusal(body, { vision: false })).toBe(message);
  });

  it('takes an image when started with a projector, and tools it can read', () => {
    const image = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }];
    expect(chatRefusal({ messages: image }, { vision: true })).toBeUndefined();
    const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }];
    expect(chatRefusal({ messages: hi, tools }, { vision: false })).toBeUndefined();
  });
});
