/**
 * The playground's request to POST /v1/chat/completions, and the same request as a curl
 * command and as openai-python code to copy. The key is written as $LLMGW_KEY: a snippet is
 * pasted into shells, tickets and chats, and the console's key must not go with it.
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatSettings {
  model: string;
  system: string;
  /** Empty: the engine's default. */
  temperature?: number;
  maxTokens?: number;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  max_tokens?: number;
  stream: true;
  /** The engine's count of the answer's tokens comes in the stream's last chunk. */
  stream_options: { include_usage: true };
}

/** The body sent: the system prompt (when there is one) first, then the conversation. */
export function chatRequest(s: ChatSettings, conversation: readonly ChatMessage[]): ChatRequest {
  const messages: ChatMessage[] = [];
  if (s.system.trim() !== '') messages.push({ role: 'system', content: s.system });
  messages.push(...conversation);
  return {
    model: s.model,
    messages,
    ...(s.temperature === undefined ? {} : { temperature: s.temperature }),
    ...(s.maxTokens === undefined ? {} : { max_tokens: s.maxTokens }),
    stream: true,
    stream_options: { include_usage: true },
  };
}

/** A number field's value: empty is none; anything else must be a number in range. */
export function numberField(
  raw: string,
  o: { name: string; min: number; max: number; integer?: boolean },
): { value?: number; error?: string } {
  const text = raw.trim();
  if (text === '') return {};
  const n = Number(text);
  if (!Number.isFinite(n) || (o.integer === true && !Number.isInteger(n)) || n < o.min || n > o.max) {
    return {
      error: `${o.name} must be ${o.integer === true ? 'a whole number' : 'a number'} from ${o.min} to ${o.max}, or empty for the engine's default`,
    };
  }
  return { value: n };
}

/** Single-quoted for a POSIX shell: a ' inside becomes '\''. */
function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** `origin`: where the console is served (the gateway answers /v1 there too). */
export function curlCommand(origin: string, body: ChatRequest): string {
  return [
    `curl -N ${shellQuote(`${origin}/v1/chat/completions`)} \\`,
    `  -H "Authorization: Bearer $LLMGW_KEY" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d ${shellQuote(JSON.stringify(body, null, 2))}`,
  ].join('\n');
}

/** A JSON string literal is a valid Python one: the same quotes and escapes. */
const py = (s: string) => JSON.stringify(s);

/** openai-python streaming the same request, printing the answer as it comes. */
export function pythonCode(origin: string, body: ChatRequest): string {
  const args = [`    model=${py(body.model)},`, '    messages=['];
  for (const m of body.messages) args.push(`        {"role": ${py(m.role)}, "content": ${py(m.content)}},`);
  args.push('    ],');
  if (body.temperature !== undefined) args.push(`    temperature=${body.temperature},`);
  if (body.max_tokens !== undefined) args.push(`    max_tokens=${body.max_tokens},`);
  args.push('    stream=True,');
  return [
    'import os',
    '',
    'from openai import OpenAI',
    '',
    `client = OpenAI(base_url=${py(`${origin}/v1`)}, api_key=os.environ["LLMGW_KEY"])`,
    '',
    'stream = client.chat.completions.create(',
    ...args,
    ')',
    'for chunk in stream:',
    '    if chunk.choices and chunk.choices[0].delta.content:',
    '        print(chunk.choices[0].delta.content, end="", flush=True)',
    'print()',
  ].join('\n');
}
