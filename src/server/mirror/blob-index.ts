import { blobKey } from '../../models/cache-layout.js';
import type { Origin, OriginFile } from '../../models/origin.js';

/**
 * Which catalog model's file each blob key is: the mirror serves only those. Rebuilt from the
 * catalog's origins whenever the catalog or a resolution changes; read synchronously per request.
 */
export class BlobIndex {
  #byKey = new Map<string, { origin: Origin; file: OriginFile }>();

  set(origins: Iterable<Origin>): void {
    const next = new Map<string, { origin: Origin; file: OriginFile }>();
    for (const origin of origins) {
      if (origin.kind === 'path') continue;
      for (const file of origin.files) next.set(blobKey(origin, file), { origin, file });
    }
    this.#byKey = next;
  }

  lookup(key: string): { origin: Origin; file: OriginFile } | undefined {
    return this.#byKey.get(key);
  }
}
