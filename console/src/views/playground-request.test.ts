import { describe, expect, it } from 'vitest';

import { chatRequest, curlCommand, numberField, pythonCode } from './playground-request.js';

const question = [{ role: 'user' as const, content: 'Hi' }];

describe('chatRequest', () => {
  it.each([
    [
      'no system prompt, engine defaults',
      { model: 'tiny', system: '  ' },
      {
        model: 'tiny',
        messages: question,
        stream: true,
        stream_options: { include_usage: true },
      },
    ],
    [
      'a system prompt first, temperature and max tokens',
      { model: 'qwen:sql', system: 'Be brief.', temperature: 0, maxTokens: 64 },
      {
        model: 'qwen:sql',
        messages: [{ role: 'system', content: 'Be brief.' }, ...question],
        temperature: 0,
        max_tokens: 64,
        stream: true,
        stream_options: { include_usage: true },
      },
    ],
  ])('%s', (_name, settings, body) => {
    expect(chatRequest(settings, question)).toEqual(body);
  });
});

describe('numberField', () => {
  const temperature = { name: 'Temperature', min: 0, max: 2 };
  const maxTokens = { name: 'Max tokens', min: 1, max: 1000, integer: true };
  it.each([
    ['', temperature, {}],
    [' 0.7 ', temperature, { value: 0.7 }],
    ['0', temperature, { value: 0 }],
    [
      '2.5',
      temperature,
      { error: "Temperature must be a number from 0 to 2, or empty for the engine's default" },
    ],
    [
      'warm',
      temperature,
      { error: "Temperature must be a number from 0 to 2, or empty for the engine's default" },
    ],
    ['256', maxTokens, { value: 256 }],
    [
      '1.5',
      maxTokens,
      { error: "Max tokens must be a whole number from 1 to 1000, or empty for the engine's default" },
    ],
    [
      '0',
      maxTokens,
      { error: "Max tokens must be a whole number from 1 to 1000, or empty for the engine's default" },
    ],
  ])('%j', (raw, o, out) => {
    expect(numberField(raw, o)).toEqual(out);
  });
});

describe('the request as code', () => {
  const body = chatRequest(
    { model: 'tiny', system: 'It\'s "quoted"\nand two lines', temperature: 0.7, maxTokens: 128 },
    question,
  );

  it('curl: the key as $LLMGW_KEY, single quotes in the body closed and reopened', () => {
    expect(curlCommand('http://127.0.0.1:8080', body)).toBe(
      [
        "curl -N 'http://127.0.0.1:8080/v1/chat/completions' \\",
        '  -H "Authorization: Bearer $LLMGW_KEY" \\',
        "  -H 'Content-Type: application/json' \\",
        `  -d '${JSON.stringify(body, null, 2).replaceAll("'", "'\\''")}'`,
      ].join('\n'),
    );
    expect(curlCommand('http://h', body)).toContain(`"content": "It'\\''s \\"quoted\\"\\nand two lines"`);
  });

  it('openai-python: the same request, streamed, the key from the environment', () => {
    expect(pythonCode('https://llm.example', body)).toBe(
      [
        'import os',
        '',
        'from openai import OpenAI',
        '',
        'client = OpenAI(base_url="https://llm.example/v1", api_key=os.environ["LLMGW_KEY"])',
        '',
        'stream = client.chat.completions.create(',
        '    model="tiny",',
        '    messages=[',
        '        {"role": "system", "content": "It\'s \\"quoted\\"\\nand two lines"},',
        '        {"role": "user", "content": "Hi"},',
        '    ],',
        '    temperature=0.7,',
        '    max_tokens=128,',
        '    stream=True,',
        ')',
        'for chunk in stream:',
        '    if chunk.choices and chunk.choices[0].delta.content:',
        '        print(chunk.choices[0].delta.content, end="", flush=True)',
        'print()',
      ].join('\n'),
    );
  });

  it('leaves out what the engine decides when the fields are empty', () => {
    const plain = pythonCode('http://h', chatRequest({ model: 'm', system: '' }, question));
    expect(plain).not.toContain('temperature');
    expect(plain).not.toContain('max_tokens');
    expect(plain).not.toContain('"system"');
  });
});
