/**
 * Writes safetensors files (the layout of huggingface/safetensors' format spec): a little-endian
 * u64 header length, the JSON header (each tensor's dtype, shape and data_offsets into the data,
 * optional `__metadata__` strings), padded with spaces to 8 bytes as the library writes it, then
 * the tensors' bytes (zeros here: what is checked is the header).
 */

export interface FakeSafetensor {
  name: string;
  /** F32, F16, BF16, I8, ... */
  dtype: string;
  shape: number[];
  bytes: number;
}

export function writeSafetensors(
  tensors: readonly FakeSafetensor[] = [],
  metadata?: Record<string, string>,
): Buffer {
  const header: Record<string, unknown> = metadata === undefined ? {} : { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes] };
    offset += t.bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  return Buffer.concat([length, Buffer.from(json), Buffer.alloc(offset)]);
}
