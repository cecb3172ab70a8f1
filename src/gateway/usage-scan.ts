/**
 * Token counts from an engine's answer, without parsing the whole of it: the numbers
 * after the last `"usage"` (it comes last in OpenAI's shape, and llama.cpp's and vLLM's).
 */
export interface TokenCounts {
  prompt: number;
  completion: number;
}

export function scanUsage(text: string): TokenCounts | undefined {
  const at = text.lastIndexOf('"usage"');
  if (at < 0) return undefined;
  const tail = text.slice(at, at + 600);
  const prompt = /"prompt_tokens"\s*:\s*(\d+)/.exec(tail);
  const completion = /"completion_tokens"\s*:\s*(\d+)/.exec(tail);
  // The Responses API says input_tokens and output_tokens.
  const input = prompt ?? /"input_tokens"\s*:\s*(\d+)/.exec(tail);
  const output = completion ?? /"output_tokens"\s*:\s*(\d+)/.exec(tail);
  if (input === null && output === null) return undefined;
  return { prompt: Number(input?.[1] ?? 0), completion: Number(output?.[1] ?? 0) };
}
