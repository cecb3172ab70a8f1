import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { gguf } from '@huggingface/gguf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { writeGguf } from './writer.js';

/** The writer's files read back by @huggingface/gguf, the parser the product uses. */
describe('writeGguf', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-gguf-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function readBack(file: Buffer) {
    const path = join(dir, `${String(Math.random()).slice(2)}.gguf`);
    await writeFile(path, file);
    return gguf(path, { allowLocalFile: true });
  }

  it('writes every value type, arrays, tensor infos and aligned data', async () => {
    const file = writeGguf({
      metadata: [
        ['general.architecture', { t: 'str', v: 'llama' }],
        ['a.u8', { t: 'u8', v: 200 }],
        ['a.i8', { t: 'i8', v: -5 }],
        ['a.u16', { t: 'u16', v: 60000 }],
        ['a.i16', { t: 'i16', v: -3000 }],
        ['a.u32', { t: 'u32', v: 131072 }],
        ['a.i32', { t: 'i32', v: -7 }],
        ['a.f32', { t: 'f32', v: 0.5 }],
        ['a.bool', { t: 'bool', v: true }],
        ['a.u64', { t: 'u64', v: 2n ** 40n }],
        ['a.i64', { t: 'i64', v: -1n }],
        ['a.f64', { t: 'f64', v: 1e-6 }],
        ['a.arr', { t: 'arr', of: 'i32', v: [8, 0, 8] }],
        ['a.strs', { t: 'arr', of: 'str', v: ['x', 'yz'] }],
      ],
      tensors: [
        { name: 'blk.0.attn_norm.weight', shape: [3], type: 0, bytes: 12 },
        { name: 'empty', shape: [0], type: 0, bytes: 0 },
        { name: 'token_embd.weight', shape: [32, 2], type: 8, bytes: 2 * 34 },
      ],
      alignment: 64,
    });
    const parsed = await readBack(file);
    const meta = parsed.metadata as unknown as Record<string, unknown>;
    expect(meta).toMatchObject({
      version: 3,
      tensor_count: 3n,
      kv_count: 15n,
      'general.architecture': 'llama',
      'a.u8': 200,
      'a.i8': -5,
      'a.u16': 60000,
      'a.i16': -3000,
      'a.u32': 131072,
      'a.i32': -7,
      'a.f32': 0.5,
      'a.bool': true,
      'a.u64': 2n ** 40n,
      'a.i64': -1n,
      'a.f64': 1e-6,
      'a.arr': [8, 0, 8],
      'a.strs': ['x', 'yz'],
      'general.alignment': 64,
    });
    expect(parsed.tensorInfos).toEqual([
      { name: 'blk.0.attn_norm.weight', n_dims: 1, shape: [3n], dtype: 0, offset: 0n },
      { name: 'empty', n_dims: 1, shape: [0n], dtype: 0, offset: 64n },
      { name: 'token_embd.weight', n_dims: 2, shape: [32n, 2n], dtype: 8, offset: 64n },
    ]);
    expect(Number(parsed.tensorDataOffset) % 64).toBe(0);
    // Data: 12 bytes padded to 64, nothing, then 68 bytes padded to 128.
    expect(file.length).toBe(Number(parsed.tensorDataOffset) + 64 + 128);
  });
});
