import { afterEach, describe, expect, it } from 'vitest';

import {
  deepseekV2Lite,
  gemma2_9b,
  llama31_8b,
  qwen25_7b,
  tinyTensors,
} from '../../test/fakes/gguf/models.js';
import { type FileServer, serveFiles } from '../../test/fakes/gguf/serve.js';
import { writeGguf } from '../../test/fakes/gguf/writer.js';
import { GgufReadError, readGgufShape } from './read-gguf.js';
import type { Known } from './shape.js';

const value = <T>(k: Known<T>): T | string => (k.known ? k.value : `unknown: ${k.reason}`);

let server: FileServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('readGgufShape over HTTP range requests', () => {
  it.each([
    ['Llama 3.1 8B', llama31_8b, { layers: 32, kvPerToken: 131_072, context: 131072 }],
    ['Qwen2.5 7B', qwen25_7b, { layers: 28, kvPerToken: 57_344, context: 32768 }],
    ['Gemma 2 9B', gemma2_9b, { layers: 42, kvPerToken: 344_064, context: 8192 }],
    ['DeepSeek-V2-Lite', deepseekV2Lite, { layers: 27, kvPerToken: 31_104, context: 163840 }],
  ])(
    '%s: the shape comes from the header, and the weights are not downloaded',
    async (_name, metadata, expected) => {
      const tensors = tinyTensors();
      const file = writeGguf({ metadata, tensors });
      server = await serveFiles({ '/model.gguf': file });

      const shape = await readGgufShape(server.url('/model.gguf'));

      expect(value(shape.layers)).toBe(expected.layers);
      expect(value(shape.trainedContext)).toBe(expected.context);
      expect(shape.kv.known && shape.kv.value.perToken).toBe(expected.kvPerToken);
      expect(value(shape.dtype)).toBe('Q4_K_M');
      // From the tensor infos: Q4_K 144 B per 256 values, F32 4 B.
      expect(value(shape.parameters)).toBe(1024 + 256 + (6 * 1024 * 1024) / 4);
      expect(value(shape.weightBytes)).toBe(4 * 144 + 256 * 4 + 6 * 1024 * 1024);
      // One 2 MB range of a file over 6 MB.
      expect(file.length).toBeGreaterThan(6 * 1024 * 1024);
      expect(server.bytesSent()).toBeLessThan(file.length / 2);
      expect(server.requests.every((r) => r.headers.range?.startsWith('bytes=0-'))).toBe(true);
    },
  );

  it('sends the authorization header with every range request', async () => {
    server = await serveFiles({ '/gated.gguf': writeGguf({ metadata: llama31_8b, tensors: tinyTensors() }) });
    let fetched = 0;
    const counting: typeof fetch = (input, init) => {
      fetched++;
      return fetch(input, init);
    };
    await readGgufShape(server.url('/gated.gguf'), { fetch: counting, authorization: 'Bearer hf_test' });
    expect(fetched).toBeGreaterThan(0);
    expect(server.requests.map((r) => r.headers.authorization)).toEqual(
      server.requests.map(() => 'Bearer hf_test'),
    );
  });

  it('refuses an answer that is not the file, saying what the server answered', async () => {
    server = await serveFiles({}, { status: 401 });
    const url = server.url('/gated.gguf');
    await expect(readGgufShape(url)).rejects.toThrow(
      new GgufReadError(`reading the GGUF header of ${url}: the server answered 401 Unauthorized`),
    );
  });

  it('refuses a server that sends the whole file for a range request, before reading it', async () => {
    const file = writeGguf({ metadata: llama31_8b, tensors: tinyTensors() });
    server = await serveFiles({ '/big.gguf': file }, { ignoreRange: true });
    const url = server.url('/big.gguf');
    await expect(readGgufShape(url)).rejects.toThrow(
      `${url} does not answer range requests (it answered 200 with all ${file.length} bytes): its GGUF header cannot be read without downloading the weights`,
    );
  });

  it('takes a small file sent whole', async () => {
    server = await serveFiles({ '/small.gguf': writeGguf({ metadata: qwen25_7b }) }, { ignoreRange: true });
    const shape = await readGgufShape(server.url('/small.gguf'));
    expect(value(shape.layers)).toBe(28);
  });

  it('refuses a file that is not a GGUF', async () => {
    server = await serveFiles({ '/x.gguf': Buffer.from('<html>not a model</html>') });
    const url = server.url('/x.gguf');
    await expect(readGgufShape(url)).rejects.toThrow(
      `reading the GGUF header of ${url}: not a valid gguf file: not starting with GGUF magic number`,
    );
  });

  it('refuses a path that is not a URL', async () => {
    await expect(readGgufShape('/models/x.gguf')).rejects.toThrow(
      '/models/x.gguf is not an http(s) URL: the GGUF header is read over HTTP',
    );
  });
});
