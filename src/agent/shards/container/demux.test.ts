import { describe, expect, it } from 'vitest';

import { frame, StreamDemuxer } from './demux.js';

describe('StreamDemuxer', () => {
  it('splits frames cut anywhere across chunks, keeping each stream', () => {
    const stream = Buffer.concat([
      frame(1, 'main: loading model\n'),
      frame(2, 'error: out of memory\n'),
      frame(1, Buffer.alloc(0)),
      frame(1, 'ünïcode\n'),
    ]);
    // Every cut point, and byte by byte.
    for (const size of [1, 3, 7, 8, 9, 13, stream.length]) {
      const frames: [number, string][] = [];
      const d = new StreamDemuxer((s, p) => frames.push([s, p.toString()]));
      for (let i = 0; i < stream.length; i += size) d.push(stream.subarray(i, i + size));
      expect(frames, `chunks of ${size}`).toEqual([
        [1, 'main: loading model\n'],
        [2, 'error: out of memory\n'],
        [1, ''],
        [1, 'ünïcode\n'],
      ]);
      expect(d.pendingBytes).toBe(0);
    }
  });

  it('reads the size as a big-endian uint32 and holds an incomplete frame', () => {
    const payload = Buffer.alloc(70_000, 0x61);
    const bytes = frame(2, payload);
    expect([...bytes.subarray(0, 8)]).toEqual([2, 0, 0, 0, 0x00, 0x01, 0x11, 0x70]);
    const got: number[] = [];
    const d = new StreamDemuxer((_, p) => got.push(p.length));
    d.push(bytes.subarray(0, 60_000));
    expect(got).toEqual([]);
    expect(d.pendingBytes).toBe(60_000);
    d.push(bytes.subarray(60_000));
    expect(got).toEqual([70_000]);
  });
});
