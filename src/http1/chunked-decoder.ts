/**
 * Takes the chunked framing off a body (RFC 9112, 7.1) as its bytes arrive, in pieces of
 * any size: the data comes out as slices of what came in (no copy), chunk extensions and
 * trailers are read and dropped.
 */
export class ChunkedDecoder {
  /** size: reading a size line; data: inside a chunk; dataEnd: the CRLF after one; trailer: after the last. */
  #state: 'size' | 'data' | 'dataEnd' | 'trailer' | 'done' = 'size';
  #line = '';
  #left = 0;

  get done(): boolean {
    return this.#state === 'done';
  }

  /**
   * Feeds bytes; `onData` gets each piece of body. Returns how many bytes of `input` were
   * the body's framing (the rest, if any, follows the body). Throws on malformed framing.
   */
  push(input: Buffer, onData: (piece: Buffer) => void): number {
    let i = 0;
    while (i < input.length && this.#state !== 'done') {
      switch (this.#state) {
        case 'size':
        case 'trailer':
        case 'dataEnd': {
          const nl = input.indexOf(10, i);
          const end = nl < 0 ? input.length : nl + 1;
          this.#line += input.toString('latin1', i, end);
          i = end;
          if (this.#line.length > 4096) throw new Error('chunk framing line too long');
          if (nl < 0) break;
          this.#lineDone(this.#line.endsWith('\r\n') ? this.#line.slice(0, -2) : this.#line.slice(0, -1));
          this.#line = '';
          break;
        }
        case 'data': {
          const take = Math.min(this.#left, input.length - i);
          onData(input.subarray(i, i + take));
          i += take;
          this.#left -= take;
          if (this.#left === 0) this.#state = 'dataEnd';
          break;
        }
      }
    }
    return i;
  }

  #lineDone(line: string): void {
    if (this.#state === 'dataEnd') {
      if (line !== '') throw new Error('chunk data longer than its size');
      this.#state = 'size';
      return;
    }
    if (this.#state === 'trailer') {
      if (line === '') this.#state = 'done';
      return;
    }
    const semi = line.indexOf(';');
    const hex = (semi < 0 ? line : line.slice(0, semi)).trim();
    if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) throw new Error(`bad chunk size "${hex.slice(0, 20)}"`);
    const size = parseInt(hex, 16);
    if (size === 0) {
      this.#state = 'trailer';
      return;
    }
    this.#left = size;
    this.#state = 'data';
  }
}
