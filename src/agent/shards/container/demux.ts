/**
 * Docker's multiplexed stream (logs and attach of a container without a TTY; Podman's
 * libpod logs the same): frames of an 8-byte header — the stream (0 stdin, 1 stdout,
 * 2 stderr), three zero bytes, the payload's size as a big-endian uint32 — then the
 * payload. Frames arrive cut anywhere across chunks.
 */
export class StreamDemuxer {
  readonly #onFrame: (stream: number, payload: Buffer) => void;
  #pending: Buffer = Buffer.alloc(0);

  constructor(onFrame: (stream: number, payload: Buffer) => void) {
    this.#onFrame = onFrame;
  }

  push(chunk: Buffer): void {
    let data = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    while (data.length >= 8) {
      const size = data.readUInt32BE(4);
      if (data.length < 8 + size) break;
      const stream = data[0] ?? 1;
      this.#onFrame(stream, data.subarray(8, 8 + size));
      data = data.subarray(8 + size);
    }
    // A copy, so the chunk the socket handed us is not held by a view.
    this.#pending = Buffer.from(data);
  }

  /** Bytes of a frame not complete yet (a stream that ended there lost them). */
  get pendingBytes(): number {
    return this.#pending.length;
  }
}

/** One frame, as the daemon writes it: for tests and fakes. */
export function frame(stream: 1 | 2, payload: string | Buffer): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}
