/**
 * Key/values as `@huggingface/gguf` returns them (u64/i64 as bigint, the rest as numbers,
 * strings, booleans, arrays), for the pure extractor's tests without a file.
 */
import type { GgufValue } from './writer.js';

export function asMetadata(entries: [string, GgufValue][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of entries) {
    if (value.t === 'arr')
      out[key] = value.v.map((v) => (value.of === 'u64' || value.of === 'i64' ? BigInt(v as number) : v));
    else out[key] = value.t === 'u64' || value.t === 'i64' ? BigInt(value.v) : value.v;
  }
  return out;
}
