/**
 * The leading blocks of a request's prompt as chained hashes, for prefix-aware routing
 * (as llm-d's approximate prefix scorer): two requests whose prompts start alike share
 * their first hashes, so the replica that computed one likely holds the other's start in
 * its prefix cache. Engines cache whole blocks of tokens; without the model's tokenizer a
 * block here is a fixed number of characters of the prompt as the engine's chat template
 * would lay it out (roles, then contents, in order).
 */

/** Characters per block: about 64 tokens at ~4 characters a token (llm-d's effective block size). */
export const BLOCK_CHARS = 256;
/**
 * Only the prompt's first 16 KiB are hashed (64 blocks, ~4k tokens): enough to tell shared
 * system prompts and conversations apart, and it bounds the work per request (~10 µs)
 * whatever the prompt's length. Past it, the conversation key tells turns apart.
 */
export const PREFIX_MAX_CHARS = 16_384;

/** The 30 bits kept of each hash: small integers, which Maps key on without boxing. */
const KEEP = 0x3fffffff;

/**
 * FNV-1a over the prompt's characters, one hash kept at every block boundary: the hash of
 * block i covers everything before it (chained), so equal hashes mean equal prefixes.
 */
class BlockHasher {
  readonly hashes: number[] = [];
  #h = 0x811c9dc5;
  #inBlock = 0;
  #total = 0;

  get full(): boolean {
    return this.#total >= PREFIX_MAX_CHARS;
  }

  feed(text: string): void {
    let h = this.#h;
    let inBlock = this.#inBlock;
    const end = Math.min(text.length, PREFIX_MAX_CHARS - this.#total);
    for (let i = 0; i < end; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
      if (++inBlock === BLOCK_CHARS) {
        this.hashes.push((h >>> 0) & KEEP);
        inBlock = 0;
      }
    }
    this.#h = h;
    this.#inBlock = inBlock;
    this.#total += end;
  }
}

/** One message's content as text: a string, or the parts of an array (text as it is, others as JSON). */
function feedContent(hasher: BlockHasher, content: unknown): void {
  if (typeof content === 'string') {
    hasher.feed(content);
    return;
  }
  if (!Array.isArray(content)) {
    if (content !== undefined && content !== null) hasher.feed(JSON.stringify(content));
    return;
  }
  for (const part of content as unknown[]) {
    if (hasher.full) return;
    const text = (part as { text?: unknown } | null)?.text;
    if (typeof text === 'string') hasher.feed(text);
    else if (part !== null && part !== undefined) hasher.feed(JSON.stringify(part));
  }
}

function feedItems(hasher: BlockHasher, items: readonly unknown[]): void {
  for (const item of items) {
    if (hasher.full) return;
    if (typeof item === 'string') {
      hasher.feed(item);
      continue;
    }
    const m = item as { role?: unknown; content?: unknown } | null;
    if (m === null || typeof m !== 'object') continue;
    hasher.feed(typeof m.role === 'string' ? m.role : '');
    hasher.feed('\n');
    feedContent(hasher, m.content);
    hasher.feed('\n\n');
  }
}

/**
 * The chained hashes of the prompt's full blocks, from the start, at most
 * PREFIX_MAX_CHARS / BLOCK_CHARS of them: chat `messages` (after `tools`, which engines
 * render first), a completion's `prompt`, or a response's `input`. Empty when the prompt
 * is shorter than one block: nothing worth routing for is cached then.
 */
export function promptBlocks(body: Record<string, unknown>): number[] {
  const hasher = new BlockHasher();
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    const tools = body['tools'];
    if (Array.isArray(tools) && tools.length > 0) hasher.feed(JSON.stringify(tools));
    feedItems(hasher, messages);
    return hasher.hashes;
  }
  const prompt = body['prompt'];
  if (typeof prompt === 'string') hasher.feed(prompt);
  else if (Array.isArray(prompt) && typeof prompt[0] === 'string') hasher.feed(prompt[0]);
  const input = body['input'];
  if (typeof input === 'string') hasher.feed(input);
  else if (Array.isArray(input)) feedItems(hasher, input);
  return hasher.hashes;
}
