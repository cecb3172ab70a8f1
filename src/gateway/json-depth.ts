const quote = 0x22;
const backslash = 0x5c;
const open = new Set([0x5b, 0x7b]);
const close = new Set([0x5d, 0x7d]);

/**
 * Whether a JSON text nests arrays and objects more than `max` deep. Engines parse request
 * bodies with recursive parsers (llama.cpp's nlohmann::json, Python's json): a body nested
 * thousands deep can exhaust their stack, so the gateway refuses it before it is parsed or
 * sent on. One pass over the bytes, jumping over strings (base64 images are long strings).
 */
export function nestsDeeperThan(body: Buffer, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const b = body[i] as number;
    if (b === quote) {
      i = stringEnd(body, i);
      if (i < 0) return false;
    } else if (open.has(b)) {
      if (++depth > max) return true;
    } else if (close.has(b)) {
      depth--;
    }
  }
  return false;
}

/** The index of the quote that closes the string opened at `start`; -1 when it never closes. */
function stringEnd(body: Buffer, start: number): number {
  let i = start;
  for (;;) {
    i = body.indexOf(quote, i + 1);
    if (i < 0) return -1;
    // Escaped when an odd number of backslashes comes before it.
    let slashes = 0;
    while (body[i - 1 - slashes] === backslash) slashes++;
    if (slashes % 2 === 0) return i;
  }
}
