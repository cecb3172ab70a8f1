import { isUtf8 } from 'node:buffer';

import { nestsDeeperThan } from './json-depth.js';
import { GatewayError } from './openai-errors.js';

/**
 * What OpenAI's API refuses with 400, refused here before a request reaches an engine:
 * engines answer many of these with a 500 (llama.cpp's JSON library throws on a lone
 * surrogate, a number past 1.8e308 or `"tools": 5`), which says nothing of the replica and
 * costs every other client a trip to it. Only OpenAI's own fields are checked, each as
 * OpenAI documents it; fields of an engine's own (llama.cpp's `lora`, vLLM's `guided_json`)
 * and unknown ones pass as they are. A `null` counts as absent, as OpenAI takes it.
 */

/** The deepest nesting of arrays and objects a body may have (tool schemas nest a few levels; engines' parsers recurse). */
export const depthMax = 100;

/** The body of a /v1 POST as a JSON object; throws GatewayError for anything an engine could not read. */
export function parseBody(raw: Buffer): Record<string, unknown> {
  // Decoding would replace bad bytes with U+FFFD here while the engine got them as they came.
  if (!isUtf8(raw))
    throw new GatewayError(
      'invalid_json',
      'the body is not valid UTF-8: encode the JSON text as UTF-8 (escape other bytes as \\uXXXX)',
    );
  if (nestsDeeperThan(raw, depthMax))
    throw new GatewayError(
      'invalid_json',
      `the body nests arrays or objects more than ${depthMax} levels deep: no request needs that; flatten it`,
    );
  const text = raw.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw notAnObject(e instanceof Error ? e.message : 'unreadable');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw notAnObject('not an object');
  // A lone surrogate can only come from a \uD8xx-\uDFFF escape: only then are strings read.
  const escapes = text.includes('\\ud') || text.includes('\\uD');
  if (!clean(parsed, escapes)) {
    const bad = firstUnreadable(parsed, '', escapes) ?? { param: '', what: 'a value' };
    const at = bad.param === '' ? 'the body' : bad.param;
    throw new GatewayError(
      'invalid_request',
      bad.what === 'number'
        ? `${at} is a number beyond what a 64-bit float holds (±1.8e308): send a finite number`
        : `${at} has a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF escape): send each surrogate in its pair, or the character itself`,
      bad.param === '' ? {} : { param: bad.param },
    );
  }
  return parsed as Record<string, unknown>;
}

function notAnObject(why: string): GatewayError {
  return new GatewayError(
    'invalid_json',
    `the body is not a JSON object (${why}): send {"model": "...", ...}`,
  );
}

/** ES2024's String.prototype.isWellFormed (Node 20+), beyond the ES2023 library this project types against. */
const wellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** Whether every number is finite and (when `strings`) every string and key well formed: no allocation. */
function clean(v: unknown, strings: boolean): boolean {
  if (typeof v === 'number') return Number.isFinite(v);
  if (typeof v === 'string') return !strings || wellFormed(v);
  if (typeof v !== 'object' || v === null) return true;
  if (Array.isArray(v)) {
    for (const item of v) if (!clean(item, strings)) return false;
    return true;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) if ((strings && !wellFormed(k)) || !clean(o[k], strings)) return false;
  return true;
}

/** Where `clean` failed, named as a param (`messages[0].content`): walked again only for a refusal. */
function firstUnreadable(
  v: unknown,
  at: string,
  strings: boolean,
): { param: string; what: 'number' | 'string' } | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? undefined : { param: at, what: 'number' };
  if (typeof v === 'string') return !strings || wellFormed(v) ? undefined : { param: at, what: 'string' };
  if (typeof v !== 'object' || v === null) return undefined;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const bad = firstUnreadable(v[i], `${at}[${i}]`, strings);
      if (bad) return bad;
    }
    return undefined;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) {
    const name = at === '' ? k : `${at}.${k}`;
    if (strings && !wellFormed(k)) return { param: name, what: 'string' };
    const bad = firstUnreadable(o[k], name, strings);
    if (bad) return bad;
  }
  return undefined;
}

/** A field's problem: which one (OpenAI's `param`) and what to send instead. */
interface Problem {
  param: string;
  message: string;
}

type Check = (v: unknown, param: string) => Problem | undefined;

/** How a value a client sent is named back to it: its type, or a short number or string. */
function shown(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return v.length <= 40 ? JSON.stringify(v) : 'a string';
  if (typeof v === 'boolean') return String(v);
  if (v === null) return 'null';
  if (v === undefined) return 'missing';
  return Array.isArray(v) ? 'an array' : 'an object';
}

const problem = (param: string, v: unknown, want: string): Problem => ({
  param,
  message: `${param} is ${shown(v)}: send ${want}`,
});

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Engines keep counts in 32-bit integers. */
const int32Max = 2_147_483_647;

function integer(min: number, max: number, also = ''): Check {
  const want = `a whole number from ${min} to ${max}${also}`;
  return (v, param) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max
      ? undefined
      : problem(param, v, want);
}

function number(min: number, max: number): Check {
  return (v, param) =>
    typeof v === 'number' && v >= min && v <= max
      ? undefined
      : problem(param, v, `a number from ${min} to ${max}`);
}

const boolean: Check = (v, param) =>
  typeof v === 'boolean' ? undefined : problem(param, v, 'true or false');
const string: Check = (v, param) => (typeof v === 'string' ? undefined : problem(param, v, 'a string'));
const object: Check = (v, param) => (isObject(v) ? undefined : problem(param, v, 'a JSON object'));
const seed: Check = (v, param) =>
  typeof v === 'number' && Number.isInteger(v) ? undefined : problem(param, v, 'a whole number');

function oneOf(...values: string[]): Check {
  const want = values.map((s) => `"${s}"`).join(', ');
  return (v, param) =>
    typeof v === 'string' && values.includes(v) ? undefined : problem(param, v, `one of ${want}`);
}

/** A JSON object with a string `type`: OpenAI's shape for response_format and the like. */
const typed: Check = (v, param) =>
  isObject(v) && typeof v['type'] === 'string'
    ? undefined
    : problem(param, v, 'a JSON object with a string "type"');

const stop: Check = (v, param) => {
  if (typeof v === 'string') return undefined;
  if (Array.isArray(v) && v.length <= 4 && v.every((s) => typeof s === 'string')) return undefined;
  return problem(param, v, 'a string, or an array of up to 4 strings');
};

const logitBias: Check = (v, param) => {
  if (!isObject(v)) return problem(param, v, 'a JSON object of token ids to numbers from -100 to 100');
  for (const k in v) {
    const bias = v[k];
    if (typeof bias !== 'number' || bias < -100 || bias > 100)
      return problem(`${param}.${k}`, bias, 'a number from -100 to 100');
  }
  return undefined;
};

const roles = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);
const messageShape = '{"role": "user", "content": "..."}';
const toolShape = '{"type": "function", "function": {"name": "...", "parameters": {...}}}';

/** A message's content: a string, or an array of parts each with a string `type`. */
function content(v: unknown, param: string): Problem | undefined {
  if (typeof v === 'string') return undefined;
  if (!Array.isArray(v))
    return problem(param, v, 'a string, or an array of parts such as {"type": "text", "text": "..."}');
  for (let i = 0; i < v.length; i++) {
    const part: unknown = v[i];
    const at = `${param}[${i}]`;
    if (!isObject(part) || typeof part['type'] !== 'string')
      return problem(at, part, 'a part such as {"type": "text", "text": "..."}');
    if (part['type'] === 'text' && typeof part['text'] !== 'string')
      return problem(`${at}.text`, part['text'], 'the text as a string');
    if (part['type'] === 'image_url') {
      const image = part['image_url'];
      if (!isObject(image) || typeof image['url'] !== 'string')
        return problem(`${at}.image_url`, image, '{"url": "https://... or data:image/...;base64,..."}');
    }
  }
  return undefined;
}

const messages: Check = (v, param) => {
  if (!Array.isArray(v)) return problem(param, v, `an array of messages, each ${messageShape}`);
  if (v.length === 0)
    return { param, message: `${param} is empty: send at least one message, ${messageShape}` };
  for (let i = 0; i < v.length; i++) {
    const m: unknown = v[i];
    const at = `${param}[${i}]`;
    if (!isObject(m)) return problem(at, m, `a message, ${messageShape}`);
    const role = m['role'];
    if (typeof role !== 'string' || !roles.has(role))
      return problem(`${at}.role`, role, `one of ${[...roles].map((r) => `"${r}"`).join(', ')}`);
    const c = m['content'];
    if (c === undefined || c === null) {
      // Only an assistant's turn may go without content (it called tools instead).
      if (role !== 'assistant')
        return {
          param: `${at}.content`,
          message: `${at} (${role}) has no content: send its text as "content"`,
        };
    } else {
      const bad = content(c, `${at}.content`);
      if (bad) return bad;
    }
    const calls = m['tool_calls'];
    if (calls !== undefined && calls !== null) {
      if (!Array.isArray(calls))
        return problem(
          `${at}.tool_calls`,
          calls,
          'an array of {"id", "type": "function", "function": {"name", "arguments"}}',
        );
      for (let j = 0; j < calls.length; j++) {
        const call: unknown = calls[j];
        const fn = isObject(call) ? call['function'] : undefined;
        if (!isObject(fn) || typeof fn['name'] !== 'string' || typeof fn['arguments'] !== 'string')
          return problem(
            `${at}.tool_calls[${j}]`,
            call,
            '{"id": "...", "type": "function", "function": {"name": "...", "arguments": "<JSON text>"}}',
          );
      }
    }
  }
  return undefined;
};

const tools: Check = (v, param) => {
  if (!Array.isArray(v)) return problem(param, v, `an array of tools, each ${toolShape}`);
  for (let i = 0; i < v.length; i++) {
    const t: unknown = v[i];
    const at = `${param}[${i}]`;
    if (!isObject(t)) return problem(at, t, `a tool, ${toolShape}`);
    const type = t['type'];
    // OpenAI's custom tools: free-form input, named like functions.
    if (type === 'custom') {
      const custom = t['custom'];
      if (!isObject(custom) || typeof custom['name'] !== 'string')
        return problem(`${at}.custom`, custom, '{"name": "..."}');
      continue;
    }
    if (type !== 'function') return problem(`${at}.type`, type, `"function" (a tool is ${toolShape})`);
    const fn = t['function'];
    if (!isObject(fn)) return problem(`${at}.function`, fn, '{"name": "...", "parameters": {...}}');
    const name = fn['name'];
    if (typeof name !== 'string' || name === '')
      return problem(`${at}.function.name`, name, "the function's name, a non-empty string");
    const params = fn['parameters'];
    if (params !== undefined && params !== null && !isObject(params))
      return problem(
        `${at}.function.parameters`,
        params,
        'a JSON Schema object, such as {"type": "object", "properties": {...}}',
      );
    const description = fn['description'];
    if (description !== undefined && description !== null && typeof description !== 'string')
      return problem(`${at}.function.description`, description, 'a string');
  }
  return undefined;
};

const toolChoice: Check = (v, param) => {
  if (typeof v === 'string')
    return ['none', 'auto', 'required'].includes(v)
      ? undefined
      : problem(param, v, '"none", "auto", "required", or {"type": "function", "function": {"name": "..."}}');
  if (!isObject(v) || typeof v['type'] !== 'string')
    return problem(
      param,
      v,
      '"none", "auto", "required", or {"type": "function", "function": {"name": "..."}}',
    );
  if (v['type'] === 'function') {
    const fn = v['function'];
    if (!isObject(fn) || typeof fn['name'] !== 'string')
      return problem(`${param}.function`, fn, '{"name": "..."} naming one of the tools');
  }
  return undefined;
};

/** A prompt or input: a string, strings, token ids, or arrays of token ids. */
function textOrTokens(what: string): Check {
  const want = `${what} as a string, an array of strings, an array of token ids, or an array of arrays of token ids`;
  const token = (t: unknown) => typeof t === 'number' && Number.isInteger(t) && t >= 0;
  return (v, param) => {
    if (typeof v === 'string') return undefined;
    if (!Array.isArray(v)) return problem(param, v, want);
    if (v.every((s) => typeof s === 'string') || v.every(token)) return undefined;
    if (v.every((a) => Array.isArray(a) && a.every(token))) return undefined;
    return problem(param, v, want);
  };
}

/** Fields of every path that generates text. */
const sampling: Record<string, Check> = {
  temperature: number(0, 2),
  top_p: number(0, 1),
  presence_penalty: number(-2, 2),
  frequency_penalty: number(-2, 2),
  seed,
  stream: boolean,
  stream_options: object,
  user: string,
  logit_bias: logitBias,
};

const maxTokens = integer(1, int32Max, ' (leave it out to stop at the end of the context)');

const chatChecks = new Map<string, Check>(
  Object.entries({
    ...sampling,
    messages,
    tools,
    tool_choice: toolChoice,
    parallel_tool_calls: boolean,
    response_format: typed,
    max_tokens: maxTokens,
    max_completion_tokens: maxTokens,
    n: integer(1, 128),
    stop,
    logprobs: boolean,
    top_logprobs: integer(0, 20),
    store: boolean,
    metadata: object,
  }),
);

const completionChecks = new Map<string, Check>(
  Object.entries({
    ...sampling,
    prompt: textOrTokens('the prompt'),
    // 0 with echo scores a prompt without generating (as evaluation harnesses do).
    max_tokens: integer(0, int32Max, ' (leave it out to stop at the end of the context)'),
    n: integer(1, 128),
    best_of: integer(1, 128),
    stop,
    echo: boolean,
    logprobs: integer(0, 20),
    suffix: string,
  }),
);

const embeddingChecks = new Map<string, Check>(
  Object.entries({
    input: textOrTokens('the text to embed'),
    encoding_format: oneOf('float', 'base64'),
    dimensions: integer(1, int32Max),
    user: string,
  }),
);

const responseChecks = new Map<string, Check>(
  Object.entries({
    temperature: number(0, 2),
    top_p: number(0, 1),
    stream: boolean,
    max_output_tokens: integer(1, int32Max, ' (leave it out to stop at the end of the context)'),
    instructions: string,
    user: string,
    metadata: object,
    store: boolean,
    parallel_tool_calls: boolean,
    tools: (v, param) =>
      Array.isArray(v) && v.every((t) => isObject(t) && typeof t['type'] === 'string')
        ? undefined
        : problem(param, v, 'an array of tools, each a JSON object with a string "type"'),
  }),
);

const byPath: Readonly<Record<string, { checks: Map<string, Check>; required?: [string, string] }>> = {
  '/v1/chat/completions': {
    checks: chatChecks,
    required: ['messages', `an array of messages, each ${messageShape}`],
  },
  '/v1/completions': { checks: completionChecks, required: ['prompt', 'the prompt as a string'] },
  '/v1/embeddings': {
    checks: embeddingChecks,
    required: ['input', 'the text to embed as a string or an array of strings'],
  },
  '/v1/responses': { checks: responseChecks },
};

/** The first of OpenAI's fields of this path's body that OpenAI would refuse, as the 400 that says what to send. */
export function requestProblem(path: string, body: Record<string, unknown>): GatewayError | undefined {
  const spec = byPath[path];
  if (spec === undefined) return undefined;
  for (const k in body) {
    const check = spec.checks.get(k);
    const v = body[k];
    if (check === undefined || v === null || v === undefined) continue;
    const bad = check(v, k);
    if (bad) return new GatewayError('invalid_request', bad.message, { param: bad.param });
  }
  const required = spec.required;
  if (required !== undefined && (body[required[0]] === undefined || body[required[0]] === null))
    return new GatewayError('invalid_request', `${required[0]} is required: send ${required[1]}`, {
      param: required[0],
    });
  return undefined;
}
