/**
 * The playground's reading of a streamed chat answer: each server-sent event's data turned into
 * what the chat shows (text, the token count, why it ended, an error sent mid-stream).
 * https://platform.openai.com/docs/api-reference/chat-streaming
 */
import { SseParser } from '../live.js';

export type StreamItem =
  | { kind: 'text'; text: string }
  | { kind: 'usage'; completionTokens: number }
  | { kind: 'finish'; reason: string }
  | { kind: 'done' }
  | { kind: 'error'; message: string };

interface Chunk {
  choices?: { delta?: { content?: unknown; reasoning_content?: unknown }; finish_reason?: unknown }[];
  usage?: { completion_tokens?: unknown } | null;
  error?: { message?: unknown };
}

/** One event's data: `[DONE]`, a chunk, or an error; what is not JSON is said to be so. */
export function readChunk(data: string): StreamItem[] {
  if (data.trim() === '[DONE]') return [{ kind: 'done' }];
  let chunk: Chunk;
  try {
    const parsed: unknown = JSON.parse(data);
    if (typeof parsed !== 'object' || parsed === null) throw new Error('not an object');
    chunk = parsed;
  } catch {
    return [{ kind: 'error', message: `the gateway sent an event that is not JSON: ${data.slice(0, 200)}` }];
  }
  if (chunk.error !== undefined) {
    const m = chunk.error.message;
    return [{ kind: 'error', message: typeof m === 'string' ? m : JSON.stringify(chunk.error) }];
  }
  const out: StreamItem[] = [];
  // The playground sends n = 1: the first choice is the answer.
  const choice = chunk.choices?.[0];
  const content = choice?.delta?.content;
  if (typeof content === 'string' && content !== '') out.push({ kind: 'text', text: content });
  if (typeof choice?.finish_reason === 'string') out.push({ kind: 'finish', reason: choice.finish_reason });
  const tokens = chunk.usage?.completion_tokens;
  if (typeof tokens === 'number') out.push({ kind: 'usage', completionTokens: tokens });
  return out;
}

/** Text/event-stream in decoded pieces, out as the items of each complete event. */
export class ChatStreamReader {
  readonly #parser = new SseParser();

  push(text: string): StreamItem[] {
    return this.#parser.push(text).flatMap((e) => (e.event === 'message' ? readChunk(e.data) : []));
  }
}

/**
 * Reads a streamed answer's body to its end, handing each item on as it comes. An abort of
 * `signal` cancels the read (and throws its reason), whatever the fetch does with its body.
 */
export async function readChatStream(
  body: NonNullable<Response['body']>,
  onItem: (item: StreamItem) => void,
  signal?: AbortSignal,
): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const stop = () => void reader.cancel(signal?.reason).catch(() => undefined);
  signal?.addEventListener('abort', stop, { once: true });
  const stream = new ChatStreamReader();
  try {
    for (;;) {
      signal?.throwIfAborted();
      const { value, done } = await reader.read();
      if (done) break;
      for (const item of stream.push(value)) onItem(item);
    }
    signal?.throwIfAborted();
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}
