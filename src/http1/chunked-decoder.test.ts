import { describe, expect, it } from 'vitest';

import { seeded } from '../../test/support/timing.js';

import { ChunkedDecoder } from './chunked-decoder.js';

/** The chunked framing of `chunks`, with the last (zero) chunk and an optional trailer. */
function encode(chunks: readonly Buffer[], trailer = ''): Buffer {
  const parts: Buffer[] = [];
  for (const c of chunks)
    parts.push(Buffer.from(`${c.length.toString(16)}\r\n`, 'latin1'), c, Buffer.from('\r\n', 'latin1'));
  parts.push(Buffer.from(`0\r\n${trailer}\r\n`, 'latin1'));
  return Buffer.concat(parts);
}

/** Feeds `pieces` in order; returns the body, the bytes each push took, and whether the decoder is done. */
function decode(
  pieces: readonly Buffer[],
  decoder = new ChunkedDecoder(),
): { body: Buffer; used: number[]; done: boolean } {
  const out: Buffer[] = [];
  const used = pieces.map((p) => decoder.push(p, (d) => out.push(d)));
  return { body: Buffer.concat(out), used, done: decoder.done };
}

/** `wire` cut at random places: pieces of 1 to `max` bytes. */
function randomSplit(wire: Buffer, next: () => number, max: number): Buffer[] {
  const pieces: Buffer[] = [];
  let i = 0;
  while (i < wire.length) {
    const n = 1 + Math.floor(next() * max);
    pieces.push(wire.subarray(i, i + n));
    i += n;
  }
  return pieces;
}

const text = (s: string): Buffer => Buffer.from(s, 'latin1');

describe('ChunkedDecoder', () => {
  const chunks = [text('Hello'), text(', chunked'), text(' world!\r\n0\r\n\r\n')];
  const body = Buffer.concat(chunks);
  const wire = encode(chunks, 'X-Trailer: yes\r\n');

  it('decodes a whole body pushed at once and takes every byte', () => {
    const decoder = new ChunkedDecoder();
    expect(decoder.done).toBe(false);
    const r = decode([wire], decoder);
    expect(r.body.toString('latin1')).toBe(body.toString('latin1'));
    expect(r.used).toEqual([wire.length]);
    expect(r.done).toBe(true);
  });

  it('decodes a body cut in two at every byte boundary', () => {
    for (let k = 0; k <= wire.length; k++) {
      const r = decode([wire.subarray(0, k), wire.subarray(k)]);
      expect(r.body.equals(body), `cut at ${k}`).toBe(true);
      expect(r.used, `cut at ${k}`).toEqual([k, wire.length - k]);
      expect(r.done).toBe(true);
    }
  });

  it('decodes a body cut in three at every pair of boundaries', () => {
    for (let a = 0; a <= wire.length; a++) {
      for (let b = a; b <= wire.length; b++) {
        const r = decode([wire.subarray(0, a), wire.subarray(a, b), wire.subarray(b)]);
        if (!r.body.equals(body) || !r.done)
          expect.fail(`cut at ${a} and ${b}: ${JSON.stringify(r.body.toString('latin1'))}`);
      }
    }
  });

  it('decodes a body pushed one byte at a time, done only at its last byte', () => {
    const decoder = new ChunkedDecoder();
    const out: Buffer[] = [];
    for (let i = 0; i < wire.length; i++) {
      expect(decoder.done, `before byte ${i}`).toBe(false);
      expect(decoder.push(wire.subarray(i, i + 1), (d) => out.push(d))).toBe(1);
    }
    expect(decoder.done).toBe(true);
    expect(Buffer.concat(out).equals(body)).toBe(true);
    // Every data byte came out on its own: one piece per byte of body.
    expect(out.map((p) => p.length)).toEqual(new Array<number>(body.length).fill(1));
  });

  it('decodes binary bodies of many chunks under seeded random splits', () => {
    const next = seeded(0x5eed);
    for (let round = 0; round < 200; round++) {
      const parts: Buffer[] = [];
      const count = 1 + Math.floor(next() * 8);
      for (let c = 0; c < count; c++) {
        const part = Buffer.alloc(1 + Math.floor(next() * 300));
        // Every byte value, CR and LF included, shows up in the data.
        for (let i = 0; i < part.length; i++) part[i] = Math.floor(next() * 256);
        parts.push(part);
      }
      const all = encode(parts, round % 2 === 0 ? '' : 'a: 1\r\nb: 2\r\n');
      const pieces = randomSplit(all, next, 1 + Math.floor(next() * 40));
      const r = decode(pieces);
      expect(r.done, `round ${round}`).toBe(true);
      expect(r.body.equals(Buffer.concat(parts)), `round ${round}`).toBe(true);
      expect(r.used.reduce((a, b) => a + b, 0)).toBe(all.length);
    }
  });

  it('hands out the data as slices of the input, without copying', () => {
    const input = encode([text('abcdef')]);
    const pieces: Buffer[] = [];
    new ChunkedDecoder().push(input, (d) => pieces.push(d));
    expect(pieces).toHaveLength(1);
    const piece = pieces[0] as Buffer;
    expect(piece.toString()).toBe('abcdef');
    input[3] = 0x58; // the first data byte, after "6\r\n"
    expect(piece.toString()).toBe('Xbcdef');
  });

  it('reads sizes in either case, with leading zeros, and several digits', () => {
    const big = Buffer.alloc(0x1ab, 0x61);
    const r = decode([Buffer.concat([text('00A\r\n0123456789\r\n1aB\r\n'), big, text('\r\n0000\r\n\r\n')])]);
    expect(r.done).toBe(true);
    expect(r.body.length).toBe(10 + 0x1ab);
    expect(r.body.subarray(0, 10).toString()).toBe('0123456789');
  });

  it('reads and drops chunk extensions', () => {
    const input = text('5;name=value\r\nHello\r\n6 ; a ; b="q;x"\r\n world\r\n0;last=yes\r\n\r\n');
    const r = decode([input]);
    expect(r.body.toString()).toBe('Hello world');
    expect(r.used).toEqual([input.length]);
    expect(r.done).toBe(true);
  });

  it('reads and drops trailers, done only after the blank line that ends them', () => {
    const decoder = new ChunkedDecoder();
    const out: Buffer[] = [];
    expect(decoder.push(text('3\r\nabc\r\n0\r\nX-Checksum: 123\r\n'), (d) => out.push(d))).toBe(28);
    expect(decoder.done).toBe(false);
    expect(decoder.push(text('X-Other: v\r\n'), (d) => out.push(d))).toBe(12);
    expect(decoder.done).toBe(false);
    expect(decoder.push(text('\r\n'), (d) => out.push(d))).toBe(2);
    expect(decoder.done).toBe(true);
    expect(Buffer.concat(out).toString()).toBe('abc');
  });

  it('takes a bare LF as a line end', () => {
    const r = decode([text('5\nHello\n0\n\n')]);
    expect(r.body.toString()).toBe('Hello');
    expect(r.done).toBe(true);
  });

  it('leaves the bytes after the last chunk: push returns only what the body took', () => {
    const after = text('HTTP/1.1 200 OK\r\n\r\n');
    const decoder = new ChunkedDecoder();
    const out: Buffer[] = [];
    const input = Buffer.concat([encode([text('abc')], 'T: 1\r\n'), after]);
    const used = decoder.push(input, (d) => out.push(d));
    expect(used).toBe(input.length - after.length);
    expect(input.subarray(used).toString()).toBe('HTTP/1.1 200 OK\r\n\r\n');
    expect(decoder.done).toBe(true);
    expect(Buffer.concat(out).toString()).toBe('abc');
    // Done: nothing more is taken, nothing more comes out.
    expect(decoder.push(text('5\r\nextra\r\n'), (d) => out.push(d))).toBe(0);
    expect(out).toHaveLength(1);
  });

  it('leaves the bytes after the last chunk when the end comes in a later push', () => {
    const decoder = new ChunkedDecoder();
    const out: Buffer[] = [];
    expect(decoder.push(text('3\r\nabc\r\n0\r'), (d) => out.push(d))).toBe(10);
    expect(decoder.push(text('\n\r\nnext'), (d) => out.push(d))).toBe(3);
    expect(decoder.done).toBe(true);
    expect(Buffer.concat(out).toString()).toBe('abc');
  });

  it('takes a body of the last chunk only', () => {
    const r = decode([text('0\r\n\r\n')]);
    expect(r.body.length).toBe(0);
    expect(r.used).toEqual([5]);
    expect(r.done).toBe(true);
  });

  const badSizes: [string, string][] = [
    ['an empty size line', '\r\n'],
    ['a size that is not hex', 'xyz\r\n'],
    ['a negative size', '-1\r\n'],
    ['a signed size', '+5\r\n'],
    ['a 0x prefix', '0x5\r\n'],
    ['two numbers', '1 2\r\n'],
    ['an extension without a size', ';ext=1\r\n'],
    ['a size of 13 hex digits', '1234567890abc\r\n'],
    ['a CR inside the size line', '5\rX\r\n'],
  ];

  it.each(badSizes)('throws on %s', (_name, line) => {
    expect(() => new ChunkedDecoder().push(text(line), () => undefined)).toThrow(/bad chunk size/);
  });

  it('throws on a malformed size line that comes after good chunks, having passed the good data on', () => {
    const out: Buffer[] = [];
    const decoder = new ChunkedDecoder();
    expect(() => decoder.push(text('2\r\nok\r\nzz\r\n'), (d) => out.push(d))).toThrow(/bad chunk size "zz"/);
    expect(Buffer.concat(out).toString()).toBe('ok');
    expect(decoder.done).toBe(false);
  });

  it('throws when the CRLF after a chunk is missing', () => {
    expect(() => decode([text('3\r\nabc0\r\n\r\n')])).toThrow(/longer than its size/);
  });

  it('throws when a chunk holds more data than its size says', () => {
    expect(() => decode([text('3\r\nabcd\r\n0\r\n\r\n')])).toThrow(/longer than its size/);
  });

  it('throws on a missing CRLF after data that arrives a byte at a time', () => {
    const decoder = new ChunkedDecoder();
    const input = text('2\r\nhiX\r\n');
    expect(() => {
      for (let i = 0; i < input.length; i++) decoder.push(input.subarray(i, i + 1), () => undefined);
    }).toThrow(/longer than its size/);
  });

  it('throws on a framing line longer than 4 KiB, even before its end arrives', () => {
    const decoder = new ChunkedDecoder();
    expect(() => decoder.push(text(`5;${'x'.repeat(5000)}`), () => undefined)).toThrow(/too long/);
    const pieces = new ChunkedDecoder();
    pieces.push(text(`5;${'x'.repeat(4000)}`), () => undefined);
    expect(() => pieces.push(text('x'.repeat(200)), () => undefined)).toThrow(/too long/);
  });
});
