import { describe, expect, it } from 'vitest';

import { BLOCK_CHARS, PREFIX_MAX_CHARS, promptBlocks } from './prefix-blocks.js';

const system = 'You are a careful assistant. '.repeat(40); // 1160 characters: 4 blocks and a part
const chat = (...contents: string[]): Record<string, unknown> => ({
  model: 'm',
  messages: contents.map((content, i) => ({ role: i === 0 ? 'system' : 'user', content })),
});

describe('promptBlocks', () => {
  it.each([
    ['no prompt at all', { model: 'm' }, 0],
    ['a prompt shorter than a block', chat('hi'), 0],
    ['a long system prompt', chat(system), Math.floor((system.length + 'system\n\n\n'.length) / BLOCK_CHARS)],
    ['a completion prompt', { prompt: 'x'.repeat(BLOCK_CHARS * 3) }, 3],
    ['a responses input', { input: 'y'.repeat(BLOCK_CHARS * 2 + 5) }, 2],
    ['a huge prompt: only the first 16 KiB', chat('z'.repeat(1_000_000)), PREFIX_MAX_CHARS / BLOCK_CHARS],
  ])('hashes the full blocks of %s', (_, body, blocks) => {
    expect(promptBlocks(body)).toHaveLength(blocks);
  });

  it('gives prompts that start alike the same first hashes, and chains them (a difference ends the match)', () => {
    const a = promptBlocks(chat(system, 'first question '.repeat(40)));
    const b = promptBlocks(chat(system, 'another one '.repeat(50)));
    const shared = Math.floor(system.length / BLOCK_CHARS);
    expect(a.slice(0, shared)).toEqual(b.slice(0, shared));
    expect(a[shared + 1]).not.toBe(b[shared + 1]);
    // A change in the first block changes every hash after it.
    const c = promptBlocks(chat(`X${system.slice(1)}`, 'first question '.repeat(40)));
    expect(c.every((h, i) => h !== a[i])).toBe(true);
  });

  it('puts a conversation’s next turn after its previous one: the earlier turn’s blocks are its prefix', () => {
    const turn1 = chat(system, 'question one '.repeat(30));
    const messages = [
      ...(turn1['messages'] as object[]),
      { role: 'assistant', content: 'answer '.repeat(50) },
    ];
    const turn2 = { model: 'm', messages: [...messages, { role: 'user', content: 'question two' }] };
    const first = promptBlocks(turn1);
    expect(promptBlocks(turn2).slice(0, first.length)).toEqual(first);
  });

  it('reads text parts and hashes tools first; hashes are small integers', () => {
    const parts = promptBlocks({
      messages: [{ role: 'user', content: [{ type: 'text', text: system }] }],
    });
    expect(parts).toEqual(promptBlocks({ messages: [{ role: 'user', content: system }] }));
    const withTools = promptBlocks({ tools: [{ type: 'function', name: 'f' }], ...chat(system) });
    expect(withTools[0]).not.toBe(promptBlocks(chat(system))[0]);
    for (const h of withTools) expect(Number.isInteger(h) && h >= 0 && h < 2 ** 30).toBe(true);
  });

  it('costs no more for a 1 MB prompt than for a 16 KiB one: only the first 16 KiB are hashed', () => {
    const short = chat('w'.repeat(PREFIX_MAX_CHARS));
    const long = chat('w'.repeat(1_000_000));
    /** µs per call, the best of several rounds: a pause of the shared machine hits one round, not all. */
    const perCall = (body: Record<string, unknown>): number => {
      let best = Infinity;
      for (let round = 0; round < 5; round++) {
        const started = performance.now();
        for (let i = 0; i < 200; i++) promptBlocks(body);
        best = Math.min(best, ((performance.now() - started) * 1000) / 200);
      }
      return best;
    };
    perCall(short); // warm-up
    const a = perCall(short);
    const b = perCall(long);
    console.log(`promptBlocks: ${a.toFixed(1)} µs for 16 KiB, ${b.toFixed(1)} µs for 1 MB`);
    // Hashing the whole prompt would make the 61 times longer one tens of times slower.
    expect(b / a).toBeLessThan(4);
  });
});
