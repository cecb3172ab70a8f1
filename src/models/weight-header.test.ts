import { describe, expect, it } from 'vitest';

import { writeGguf } from '../../test/fakes/gguf/writer.js';
import { llama31_8b } from '../../test/fakes/gguf/models.js';
import { writeSafetensors } from '../../test/fakes/safetensors/writer.js';
import { checkWeightHeader, formatOfName, headerBytes, type WeightFormat } from './weight-header.js';

/** The first bytes a caller reads of a file, and its size. */
const head = (file: Buffer): [Buffer, number] => [file.subarray(0, headerBytes), file.length];

function ggufHeader(version: number, littleEndian = true): Buffer {
  const b = Buffer.alloc(24);
  b.write('GGUF', 0, 'latin1');
  if (littleEndian) b.writeUInt32LE(version, 4);
  else b.writeUInt32BE(version, 4);
  return b;
}

function safetensorsWithLength(length: bigint, rest: string): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(length);
  return Buffer.concat([b, Buffer.from(rest)]);
}

const llama = writeGguf({
  metadata: llama31_8b,
  tensors: [{ name: 'token_embd.weight', shape: [4096, 8], type: 0, bytes: 4096 * 8 * 4 }],
});
const weights = writeSafetensors([
  { name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [8, 16], bytes: 256 },
]);
// A header longer than what is read: taken on its first byte.
const manyTensors = writeSafetensors(
  Array.from({ length: 400 }, (_, i) => ({
    name: `model.layers.${i}.mlp.up_proj.weight`,
    dtype: 'BF16',
    shape: [2, 2],
    bytes: 8,
  })),
);

describe('checkWeightHeader', () => {
  it.each<[string, Buffer, WeightFormat | undefined, WeightFormat]>([
    ['a GGUF v3 named .gguf', llama, 'gguf', 'gguf'],
    ['a bare GGUF v2 header', ggufHeader(2), 'gguf', 'gguf'],
    ['a GGUF under another name, by its magic', llama, undefined, 'gguf'],
    ['a safetensors file', weights, 'safetensors', 'safetensors'],
    ['a safetensors file of no tensors', writeSafetensors(), 'safetensors', 'safetensors'],
    ['a safetensors header longer than what is read', manyTensors, 'safetensors', 'safetensors'],
    ['a safetensors file under another name', weights, undefined, 'safetensors'],
  ])('takes %s', (_what, file, named, format) => {
    expect(manyTensors.length).toBeGreaterThan(headerBytes);
    expect(checkWeightHeader(...head(file), named)).toEqual({ ok: true, format });
  });

  it.each<[string, Buffer, WeightFormat | undefined, string]>([
    ['an empty file', Buffer.alloc(0), 'gguf', 'is empty'],
    [
      'a GGUF cut short',
      ggufHeader(3).subarray(0, 20),
      'gguf',
      'is 20 bytes, shorter than a GGUF header (24 bytes)',
    ],
    [
      'a .gguf that is text',
      Buffer.from('root:$6$salt$hash:19000:0:99999:7:::\n'),
      'gguf',
      'is not a GGUF file: it does not start with the bytes GGUF',
    ],
    [
      'a GGUF v1',
      ggufHeader(1),
      'gguf',
      'is a GGUF file of version 1, and llama.cpp reads versions 2 and 3: convert the model again with a current llama.cpp (convert_hf_to_gguf.py)',
    ],
    [
      'a GGUF from the future',
      ggufHeader(4),
      'gguf',
      'is a GGUF file of version 4, and llama.cpp reads versions 2 and 3: convert the model again with a current llama.cpp (convert_hf_to_gguf.py)',
    ],
    [
      'a big-endian GGUF',
      ggufHeader(3, false),
      'gguf',
      'is a big-endian GGUF file, which llama.cpp on a little-endian machine does not read: convert the model again',
    ],
    [
      'a safetensors length past the end of the file',
      safetensorsWithLength(4096n, '{}'),
      'safetensors',
      'is not a safetensors file: its first 8 bytes give a 4096-byte header, more than the file holds',
    ],
    [
      'a safetensors length over the format bound',
      safetensorsWithLength(2n ** 40n, '{}'),
      'safetensors',
      'is not a safetensors file: its first 8 bytes give a header length outside 2 to 100000000 bytes',
    ],
    [
      'a safetensors header that is not JSON',
      safetensorsWithLength(4n, '{ab}'),
      'safetensors',
      'is not a safetensors file: its header is not JSON',
    ],
    [
      'a safetensors header that is an array',
      safetensorsWithLength(4n, '[{}]'),
      'safetensors',
      'is not a safetensors file: its header does not start with {',
    ],
    [
      'a safetensors header that is a JSON string',
      safetensorsWithLength(5n, '{"a":'),
      'safetensors',
      'is not a safetensors file: its header is not JSON',
    ],
    [
      'a few bytes',
      Buffer.from('abc'),
      'safetensors',
      'is not a safetensors file: it is 3 bytes, shorter than a header length and a JSON header',
    ],
    [
      'text under another name',
      Buffer.from('DATABASE_URL=postgres://user:secret@db/llmgw\nHF_TOKEN=hf_abcdef\n'),
      undefined,
      'is neither a GGUF file (it would start with the bytes GGUF) nor a safetensors file (an 8-byte header length, then a JSON header)',
    ],
    [
      'an SQLite database',
      Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(84)]),
      undefined,
      'is neither a GGUF file (it would start with the bytes GGUF) nor a safetensors file (an 8-byte header length, then a JSON header)',
    ],
  ])('refuses %s, in words that quote none of its bytes', (_what, file, named, why) => {
    const check = checkWeightHeader(...head(file), named);
    expect(check).toEqual({ ok: false, why });
    if (file.length > 4) expect(why).not.toContain(file.toString('latin1', 0, 5));
  });

  it('tells the format from the name', () => {
    expect(['a.gguf', 'A.GGUF', 'x.safetensors', 'config.json', 'gguf'].map(formatOfName)).toEqual([
      'gguf',
      'gguf',
      'safetensors',
      undefined,
      undefined,
    ]);
  });
});
