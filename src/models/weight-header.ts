/**
 * What a local weight file is, told from its first bytes alone: a GGUF (the magic `GGUF`, then a
 * version llama.cpp reads) or a safetensors file (a little-endian u64 header length, then that
 * many bytes of JSON). Pure: the caller reads at most `headerBytes` of the file, so a 40 GB
 * model costs a few kB, and the rules are table-tested without files. The messages never quote
 * the bytes read: a file that is not a model may hold secrets.
 */

export type WeightFormat = 'gguf' | 'safetensors';

/** Bytes read from the start of a file to tell what it is. */
export const headerBytes = 16 * 1024;

/** magic, u32 version, u64 tensor count, u64 key/value count (gguf.cpp's gguf_init_from_file). */
const ggufFixedHeader = 24;
/** gguf.cpp refuses v1 ("no longer supported") and versions after GGUF_VERSION, 3. */
const ggufVersions: readonly number[] = [2, 3];
/** The safetensors crate's bound on its JSON header (MAX_HEADER_SIZE). */
const maxSafetensorsHeader = 100_000_000;

export type HeaderCheck = { ok: true; format: WeightFormat } | { ok: false; why: string };

/** The format a file's name says it is: `.gguf`, `.safetensors`, or none. */
export function formatOfName(name: string): WeightFormat | undefined {
  const lower = name.toLowerCase();
  if (lower.endsWith('.gguf')) return 'gguf';
  if (lower.endsWith('.safetensors')) return 'safetensors';
  return undefined;
}

function checkGguf(head: Buffer, size: number): HeaderCheck {
  if (size < ggufFixedHeader || head.length < ggufFixedHeader)
    return { ok: false, why: `is ${size} bytes, shorter than a GGUF header (${ggufFixedHeader} bytes)` };
  if (head.toString('latin1', 0, 4) !== 'GGUF')
    return { ok: false, why: 'is not a GGUF file: it does not start with the bytes GGUF' };
  const version = head.readUInt32LE(4);
  if (!ggufVersions.includes(version)) {
    // gguf.cpp reads the version as the host does: one written big-endian shows its bytes swapped.
    const swapped = (version & 0xffff) === 0;
    return {
      ok: false,
      why: swapped
        ? 'is a big-endian GGUF file, which llama.cpp on a little-endian machine does not read: convert the model again'
        : `is a GGUF file of version ${version}, and llama.cpp reads versions 2 and 3: convert the model again with a current llama.cpp (convert_hf_to_gguf.py)`,
    };
  }
  return { ok: true, format: 'gguf' };
}

function checkSafetensors(head: Buffer, size: number): HeaderCheck {
  const not = 'is not a safetensors file:';
  if (size < 10 || head.length < 9)
    return { ok: false, why: `${not} it is ${size} bytes, shorter than a header length and a JSON header` };
  const length = head.readBigUInt64LE(0);
  if (length < 2n || length > BigInt(maxSafetensorsHeader)) {
    return {
      ok: false,
      why: `${not} its first 8 bytes give a header length outside 2 to ${maxSafetensorsHeader} bytes`,
    };
  }
  const n = Number(length);
  if (8 + n > size)
    return { ok: false, why: `${not} its first 8 bytes give a ${n}-byte header, more than the file holds` };
  if (head[8] !== 0x7b) return { ok: false, why: `${not} its header does not start with {` };
  // A header read whole is parsed; a longer one (a model of many tensors) is taken on its first byte.
  if (8 + n <= head.length) {
    // Starting with {, it is an object once it parses.
    try {
      JSON.parse(head.toString('utf8', 8, 8 + n));
    } catch {
      return { ok: false, why: `${not} its header is not JSON` };
    }
  }
  return { ok: true, format: 'safetensors' };
}

/**
 * Whether the bytes `head` (the start of a file of `size` bytes) are a GGUF or a safetensors
 * header: the one its name says, or, for another name, the one its first bytes say.
 */
export function checkWeightHeader(head: Buffer, size: number, named?: WeightFormat): HeaderCheck {
  if (size === 0) return { ok: false, why: 'is empty' };
  if (named === 'gguf') return checkGguf(head, size);
  if (named === 'safetensors') return checkSafetensors(head, size);
  if (head.toString('latin1', 0, 4) === 'GGUF') return checkGguf(head, size);
  const safetensors = checkSafetensors(head, size);
  if (safetensors.ok) return safetensors;
  return {
    ok: false,
    why: 'is neither a GGUF file (it would start with the bytes GGUF) nor a safetensors file (an 8-byte header length, then a JSON header)',
  };
}
