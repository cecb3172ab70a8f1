/**
 * Writes GGUF v3 files (the layout llama.cpp's gguf-py writes): the magic `GGUF`, u32 version 3,
 * u64 tensor count, u64 key/value count, the typed key/values, the tensor infos (name, n_dims,
 * dims, ggml type, offset into the data), padding to `general.alignment` (32 unless given), then
 * each tensor's data, each aligned. Little-endian throughout.
 */

/** GGUF value types, as numbered in the format. */
const T = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  str: 8,
  arr: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;

export type Scalar =
  | { t: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; v: number }
  | { t: 'u64' | 'i64'; v: bigint | number }
  | { t: 'bool'; v: boolean }
  | { t: 'str'; v: string };

export type GgufValue = Scalar | { t: 'arr'; of: Scalar['t']; v: (number | bigint | boolean | string)[] };

/** One tensor: its data is `bytes` zeros (ggml's size for its type and shape is the caller's). */
export interface FakeTensor {
  name: string;
  /** ggml's order: the fastest-moving dimension first. */
  shape: number[];
  /** GGMLQuantizationType: 0 F32, 1 F16, 8 Q8_0, 12 Q4_K, 30 BF16, ... */
  type: number;
  bytes: number;
}

export interface GgufSpec {
  metadata: [string, GgufValue][];
  tensors?: FakeTensor[];
  alignment?: number;
}

class Out {
  private chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  num(t: Scalar['t'], v: number | bigint | boolean | string): void {
    let b: Buffer;
    switch (t) {
      case 'u8':
        b = Buffer.alloc(1);
        b.writeUInt8(Number(v));
        break;
      case 'i8':
        b = Buffer.alloc(1);
        b.writeInt8(Number(v));
        break;
      case 'u16':
        b = Buffer.alloc(2);
        b.writeUInt16LE(Number(v));
        break;
      case 'i16':
        b = Buffer.alloc(2);
        b.writeInt16LE(Number(v));
        break;
      case 'u32':
        b = Buffer.alloc(4);
        b.writeUInt32LE(Number(v));
        break;
      case 'i32':
        b = Buffer.alloc(4);
        b.writeInt32LE(Number(v));
        break;
      case 'f32':
        b = Buffer.alloc(4);
        b.writeFloatLE(Number(v));
        break;
      case 'f64':
        b = Buffer.alloc(8);
        b.writeDoubleLE(Number(v));
        break;
      case 'u64':
        b = Buffer.alloc(8);
        b.writeBigUInt64LE(BigInt(v));
        break;
      case 'i64':
        b = Buffer.alloc(8);
        b.writeBigInt64LE(BigInt(v));
        break;
      case 'bool':
        b = Buffer.from([v === true ? 1 : 0]);
        break;
      case 'str': {
        const s = Buffer.from(String(v), 'utf8');
        this.num('u64', s.length);
        b = s;
        break;
      }
    }
    this.push(b);
  }
  pad(alignment: number): void {
    const rest = this.length % alignment;
    if (rest !== 0) this.push(Buffer.alloc(alignment - rest));
  }
  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

const alignUp = (n: number, a: number): number => Math.ceil(n / a) * a;

/** The whole file. */
export function writeGguf(spec: GgufSpec): Buffer {
  const alignment = spec.alignment ?? 32;
  const metadata = [...spec.metadata];
  if (spec.alignment !== undefined) metadata.push(['general.alignment', { t: 'u32', v: alignment }]);
  const tensors = spec.tensors ?? [];
  const out = new Out();
  out.push(Buffer.from('GGUF', 'ascii'));
  out.num('u32', 3);
  out.num('u64', tensors.length);
  out.num('u64', metadata.length);
  for (const [key, value] of metadata) {
    out.num('str', key);
    out.num('u32', T[value.t]);
    if (value.t === 'arr') {
      out.num('u32', T[value.of]);
      out.num('u64', value.v.length);
      for (const item of value.v) out.num(value.of, item);
    } else {
      out.num(value.t, value.v);
    }
  }
  let offset = 0;
  for (const tensor of tensors) {
    out.num('str', tensor.name);
    out.num('u32', tensor.shape.length);
    for (const dim of tensor.shape) out.num('u64', dim);
    out.num('u32', tensor.type);
    out.num('u64', offset);
    offset = alignUp(offset + tensor.bytes, alignment);
  }
  out.pad(alignment);
  for (const tensor of tensors) {
    out.push(Buffer.alloc(tensor.bytes));
    out.pad(alignment);
  }
  return out.bytes();
}
