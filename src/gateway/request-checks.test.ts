import { describe, expect, it } from 'vitest';

import { GatewayError } from './openai-errors.js';
import { parseBody, requestProblem } from './request-checks.js';

const chat = '/v1/chat/completions';
const hi = [{ role: 'user', content: 'hi' }];

/** The refusal of a body, as [param, message], or undefined when it passes. */
function refusal(path: string, body: Record<string, unknown>): [string | null, string] | undefined {
  const e = requestProblem(path, body);
  if (e === undefined) return undefined;
  expect(e.status).toBe(400);
  expect(e.code).toBe('invalid_request');
  return [e.param, e.message];
}

function parseRefusal(raw: Buffer | string): GatewayError | undefined {
  try {
    parseBody(typeof raw === 'string' ? Buffer.from(raw) : raw);
    return undefined;
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    return e as GatewayError;
  }
}

describe('parseBody', () => {
  it.each([
    [
      'a lone high surrogate',
      '{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}',
      'messages[0].content',
      /lone UTF-16 surrogate.*send each surrogate in its pair/,
    ],
    ['a lone low surrogate in a key', '{"model":"m","x":{"\\uDC00":1}}', 'x.\udc00', /lone UTF-16 surrogate/],
    [
      'a number past a double',
      '{"model":"m","max_tokens":1e309}',
      'max_tokens',
      /max_tokens is a number beyond .*±1\.8e308.*send a finite number/,
    ],
    [
      'a nested number past a double',
      '{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"maximum":-1e400}}}]}',
      'tools[0].function.parameters.maximum',
      /beyond/,
    ],
  ])('refuses %s, naming where it is', (_what, raw, param, message) => {
    const e = parseRefusal(raw);
    expect(e?.status).toBe(400);
    expect(e?.code).toBe('invalid_request');
    expect(e?.param).toBe(param);
    expect(e?.message).toMatch(message);
  });

  it('refuses a body that is not UTF-8, as the engine would have read other bytes than the gateway', () => {
    const raw = Buffer.concat([
      Buffer.from('{"model":"m","messages":[{"role":"user","content":"'),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"}]}'),
    ]);
    const e = parseRefusal(raw);
    expect(e?.code).toBe('invalid_json');
    expect(e?.message).toBe(
      'the body is not valid UTF-8: encode the JSON text as UTF-8 (escape other bytes as \\uXXXX)',
    );
  });

  it.each([
    ['not JSON', '{"model": ', /^the body is not a JSON object \(.*\): send \{"model": "\.\.\.", \.\.\.\}$/],
    ['an array', '[1]', /^the body is not a JSON object \(not an object\)/],
    [
      'nested too deep',
      `{"a":${'['.repeat(101)}${']'.repeat(101)}}`,
      /more than 100 levels deep: no request needs that; flatten it$/,
    ],
  ])('refuses a body %s', (_what, raw, message) => {
    const e = parseRefusal(raw);
    expect(e?.code).toBe('invalid_json');
    expect(e?.message).toMatch(message);
  });

  it('takes what is well formed: surrogate pairs, escapes, emoji, large finite numbers', () => {
    const body = parseBody(
      Buffer.from(
        '{"model":"m","messages":[{"role":"user","content":"\\ud83d\\ude00 é 😀 \\\\ud800"}],"seed":1e300}',
      ),
    );
    expect(body['seed']).toBe(1e300);
  });
});

describe('requestProblem', () => {
  it.each<[string, string, Record<string, unknown>, string, RegExp]>([
    [
      'tools a number',
      chat,
      { messages: hi, tools: 5 },
      'tools',
      /^tools is 5: send an array of tools, each \{"type": "function"/,
    ],
    [
      'a tool that is empty',
      chat,
      { messages: hi, tools: [{}] },
      'tools[0].type',
      /^tools\[0\]\.type is missing: send "function"/,
    ],
    [
      'a tool without a function',
      chat,
      { messages: hi, tools: [{ type: 'function' }] },
      'tools[0].function',
      /send \{"name": "\.\.\.", "parameters"/,
    ],
    [
      'a tool without a name',
      chat,
      { messages: hi, tools: [{ type: 'function', function: { parameters: {} } }] },
      'tools[0].function.name',
      /non-empty string/,
    ],
    [
      'parameters that are not an object',
      chat,
      { messages: hi, tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] },
      'tools[0].function.parameters',
      /JSON Schema object/,
    ],
    [
      'tool_choice unknown',
      chat,
      { messages: hi, tool_choice: 'always' },
      'tool_choice',
      /^tool_choice is "always": send "none", "auto", "required"/,
    ],
    [
      'tool_choice of a function without a name',
      chat,
      { messages: hi, tool_choice: { type: 'function' } },
      'tool_choice.function',
      /naming one of the tools/,
    ],
    ['messages missing', chat, {}, 'messages', /^messages is required: send an array of messages/],
    [
      'messages an object',
      chat,
      { messages: { role: 'user' } },
      'messages',
      /^messages is an object: send an array of messages/,
    ],
    ['messages empty', chat, { messages: [] }, 'messages', /^messages is empty: send at least one message/],
    [
      'a message a string',
      chat,
      { messages: ['hi'] },
      'messages[0]',
      /^messages\[0\] is "hi": send a message, \{"role": "user"/,
    ],
    [
      'an unknown role',
      chat,
      { messages: [{ role: 'robot', content: 'x' }] },
      'messages[0].role',
      /^messages\[0\]\.role is "robot": send one of "system", "developer", "user", "assistant", "tool", "function"$/,
    ],
    [
      'a user message without content',
      chat,
      { messages: [{ role: 'user' }] },
      'messages[0].content',
      /messages\[0\] \(user\) has no content: send its text as "content"/,
    ],
    [
      'content a number',
      chat,
      { messages: [{ role: 'user', content: 3 }] },
      'messages[0].content',
      /send a string, or an array of parts/,
    ],
    [
      'a part without type',
      chat,
      { messages: [{ role: 'user', content: [{ text: 'x' }] }] },
      'messages[0].content[0]',
      /a part such as/,
    ],
    [
      'a text part without text',
      chat,
      { messages: [{ role: 'user', content: [{ type: 'text' }] }] },
      'messages[0].content[0].text',
      /the text as a string/,
    ],
    [
      'an image part with a bare url',
      chat,
      { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: 'http://x/a.png' }] }] },
      'messages[0].content[0].image_url',
      /\{"url": /,
    ],
    [
      'tool calls without arguments',
      chat,
      { messages: [{ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'f' } }] }] },
      'messages[0].tool_calls[0]',
      /"arguments": "<JSON text>"/,
    ],
    [
      'max_tokens 0',
      chat,
      { messages: hi, max_tokens: 0 },
      'max_tokens',
      /^max_tokens is 0: send a whole number from 1 to 2147483647 \(leave it out/,
    ],
    ['max_tokens -1', chat, { messages: hi, max_tokens: -1 }, 'max_tokens', /from 1 to 2147483647/],
    [
      'max_tokens a string',
      chat,
      { messages: hi, max_tokens: '10' },
      'max_tokens',
      /^max_tokens is "10": send a whole number/,
    ],
    [
      'max_tokens past 32 bits',
      chat,
      { messages: hi, max_tokens: 1e20 },
      'max_tokens',
      /^max_tokens is 100000000000000000000:/,
    ],
    [
      'max_completion_tokens a fraction',
      chat,
      { messages: hi, max_completion_tokens: 1.5 },
      'max_completion_tokens',
      /whole number/,
    ],
    [
      'temperature 3',
      chat,
      { messages: hi, temperature: 3 },
      'temperature',
      /^temperature is 3: send a number from 0 to 2$/,
    ],
    [
      'temperature a string',
      chat,
      { messages: hi, temperature: 'hot' },
      'temperature',
      /^temperature is "hot": send a number from 0 to 2$/,
    ],
    ['top_p over 1', chat, { messages: hi, top_p: 1.5 }, 'top_p', /from 0 to 1$/],
    [
      'presence_penalty -3',
      chat,
      { messages: hi, presence_penalty: -3 },
      'presence_penalty',
      /from -2 to 2$/,
    ],
    [
      'frequency_penalty true',
      chat,
      { messages: hi, frequency_penalty: true },
      'frequency_penalty',
      /^frequency_penalty is true: send a number from -2 to 2$/,
    ],
    ['n 0', chat, { messages: hi, n: 0 }, 'n', /from 1 to 128/],
    ['seed a fraction', chat, { messages: hi, seed: 0.5 }, 'seed', /^seed is 0\.5: send a whole number$/],
    ['top_logprobs 21', chat, { messages: hi, top_logprobs: 21 }, 'top_logprobs', /from 0 to 20/],
    ['logprobs a number in chat', chat, { messages: hi, logprobs: 5 }, 'logprobs', /true or false/],
    ['stop a number', chat, { messages: hi, stop: 7 }, 'stop', /a string, or an array of up to 4 strings/],
    ['five stops', chat, { messages: hi, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', /up to 4 strings/],
    ['stream a string', chat, { messages: hi, stream: 'yes' }, 'stream', /true or false/],
    [
      'stream_options a string',
      chat,
      { messages: hi, stream: true, stream_options: 'usage' },
      'stream_options',
      /a JSON object/,
    ],
    [
      'response_format a string',
      chat,
      { messages: hi, response_format: 'json' },
      'response_format',
      /with a string "type"/,
    ],
    [
      'logit_bias out of range',
      chat,
      { messages: hi, logit_bias: { '50256': -101 } },
      'logit_bias.50256',
      /from -100 to 100/,
    ],
    [
      'a prompt that is a number',
      '/v1/completions',
      { prompt: 5 },
      'prompt',
      /the prompt as a string, an array of strings, an array of token ids/,
    ],
    [
      'a prompt of mixed items',
      '/v1/completions',
      { prompt: ['a', 1] },
      'prompt',
      /an array of arrays of token ids/,
    ],
    ['no prompt', '/v1/completions', {}, 'prompt', /^prompt is required/],
    ['completion logprobs 21', '/v1/completions', { prompt: 'x', logprobs: 21 }, 'logprobs', /from 0 to 20/],
    ['an input object', '/v1/embeddings', { input: { text: 'x' } }, 'input', /the text to embed as a string/],
    ['negative token ids', '/v1/embeddings', { input: [-1] }, 'input', /token ids/],
    ['no input', '/v1/embeddings', {}, 'input', /^input is required/],
    [
      'an unknown encoding',
      '/v1/embeddings',
      { input: 'x', encoding_format: 'hex' },
      'encoding_format',
      /one of "float", "base64"/,
    ],
    [
      'max_output_tokens 0',
      '/v1/responses',
      { input: 'x', max_output_tokens: 0 },
      'max_output_tokens',
      /from 1/,
    ],
    [
      'response tools without types',
      '/v1/responses',
      { input: 'x', tools: [{ name: 'f' }] },
      'tools',
      /with a string "type"/,
    ],
  ])('refuses %s', (_what, path, body, param, message) => {
    const r = refusal(path, body);
    expect(r?.[0]).toBe(param);
    expect(r?.[1]).toMatch(message);
  });

  it.each<[string, string, Record<string, unknown>]>([
    [
      'a plain chat',
      chat,
      {
        messages: hi,
        max_tokens: 16,
        temperature: 0.7,
        stream: true,
        stream_options: { include_usage: true },
      },
    ],
    [
      'nulls for what is optional',
      chat,
      { messages: hi, tools: null, max_tokens: null, temperature: null, stop: null, seed: null },
    ],
    [
      'tools and a tool conversation',
      chat,
      {
        messages: [
          { role: 'system', content: 'be brief' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'weather?' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } },
            ],
          },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
        ],
        tools: [
          {
            type: 'function',
            function: {
              name: 'weather',
              description: 'the weather',
              parameters: { type: 'object', properties: {} },
            },
          },
          { type: 'custom', custom: { name: 'grammar' } },
        ],
        tool_choice: { type: 'function', function: { name: 'weather' } },
        parallel_tool_calls: false,
      },
    ],
    [
      'parts of other types',
      chat,
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'input_audio', input_audio: { data: 'AA==', format: 'wav' } },
              { type: 'video_url', video_url: { url: 'x' } },
            ],
          },
        ],
      },
    ],
    [
      'fields of an engine’s own, of any type',
      chat,
      {
        messages: hi,
        lora: [{ id: 0, scale: 1 }],
        cache_prompt: true,
        guided_json: { type: 'object' },
        top_k: -1,
        min_p: 0.1,
        chat_template_kwargs: { enable_thinking: false },
        x_anything: [1, 'a'],
      },
    ],
    [
      'the edges of the ranges',
      chat,
      {
        messages: hi,
        temperature: 0,
        top_p: 1,
        presence_penalty: -2,
        frequency_penalty: 2,
        n: 128,
        top_logprobs: 20,
        logprobs: true,
        max_tokens: 2147483647,
        stop: ['a', 'b', 'c', 'd'],
        seed: -5,
      },
    ],
    [
      'a completion scored without generating',
      '/v1/completions',
      { prompt: 'x', max_tokens: 0, echo: true, logprobs: 1 },
    ],
    ['prompts of token ids', '/v1/completions', { prompt: [[1, 2], [3]] }],
    ['an empty prompt list', '/v1/completions', { prompt: [] }],
    ['inputs of strings', '/v1/embeddings', { input: ['a', 'b'], encoding_format: 'base64', dimensions: 64 }],
    [
      'a response',
      '/v1/responses',
      { input: [{ role: 'user', content: 'hi' }], tools: [{ type: 'web_search' }], max_output_tokens: 64 },
    ],
    ['a path it does not know', '/v1/other', { anything: 5 }],
  ])('passes %s', (_what, path, body) => {
    expect(refusal(path, body)).toBeUndefined();
  });
});
