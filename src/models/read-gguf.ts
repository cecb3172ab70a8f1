/**
 * A GGUF file's header read from a URL with HTTP range requests (`@huggingface/gguf` fetches
 * 2 MB at a time until the tensor infos end), so a 40 GB model's shape costs a few MB.
 */
import { gguf } from '@huggingface/gguf';

import { shapeFromGguf } from './gguf-shape.js';
import type { ModelShape } from './shape.js';

export interface ReadGgufOptions {
  /** Injected for tests and for the hub client's redirects and proxies; the global fetch otherwise. */
  fetch?: typeof fetch;
  /** `Authorization: Bearer …` for a gated repository; sent with every range request, never logged. */
  authorization?: string;
}

export class GgufReadError extends Error {}

/** The library asks for 2 MB at a time: a file no larger than that may come whole. */
const MAX_WHOLE_ANSWER = 2_000_000;

/** The shape of the model in the GGUF file at `url` (http or https), read without its weights. */
export async function readGgufShape(url: string, options: ReadGgufOptions = {}): Promise<ModelShape> {
  if (!/^https?:\/\//i.test(url)) {
    throw new GgufReadError(`${url} is not an http(s) URL: the GGUF header is read over HTTP`);
  }
  const fetchFn = options.fetch ?? fetch;
  // The library does not look at the status: a 401 or 404 page would be parsed as a file.
  const checked: typeof fetch = async (input, init) => {
    const res = await fetchFn(input, init);
    if (!res.ok) {
      await res.body?.cancel();
      throw new GgufReadError(
        `reading the GGUF header of ${url}: the server answered ${res.status} ${res.statusText}`.trimEnd(),
      );
    }
    // A server that ignores Range sends the whole file, weights and all: refused before the body.
    const length = Number(res.headers.get('content-length') ?? NaN);
    if (res.status !== 206 && !(length <= MAX_WHOLE_ANSWER)) {
      await res.body?.cancel();
      throw new GgufReadError(
        `${url} does not answer range requests (it answered ${res.status} with ${Number.isNaN(length) ? 'a body of unknown length' : `all ${length} bytes`}): its GGUF header cannot be read without downloading the weights`,
      );
    }
    return res;
  };
  const headers = options.authorization === undefined ? undefined : { Authorization: options.authorization };
  try {
    const parsed = await gguf(url, {
      fetch: checked,
      ...(headers === undefined ? {} : { additionalFetchHeaders: headers }),
    });
    return shapeFromGguf({
      metadata: parsed.metadata as unknown as Record<string, unknown>,
      tensorInfos: parsed.tensorInfos,
    });
  } catch (err) {
    if (err instanceof GgufReadError) throw err;
    throw new GgufReadError(
      `reading the GGUF header of ${url}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** The shape of the model in a GGUF file on this machine, read from its header alone. */
export async function readLocalGgufShape(path: string): Promise<ModelShape> {
  try {
    const parsed = await gguf(path, { allowLocalFile: true });
    return shapeFromGguf({
      metadata: parsed.metadata as unknown as Record<string, unknown>,
      tensorInfos: parsed.tensorInfos,
    });
  } catch (err) {
    throw new GgufReadError(
      `reading the GGUF header of ${path}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}
