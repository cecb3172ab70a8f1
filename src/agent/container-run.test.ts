import { describe, expect, it } from 'vitest';

import { containerMounts } from './container-run.js';

describe("a shard's container mounts", () => {
  it('mounts fetched files from the models dir, and adapters where they are, each once', () => {
    expect(
      containerMounts(['/data/models', '/data/models/hub/x', '/adapters/a/', '/adapters/a', '/adapters/ab']),
    ).toEqual([
      { source: '/adapters/a', target: '/adapters/a', readOnly: true },
      { source: '/adapters/ab', target: '/adapters/ab', readOnly: true },
      { source: '/data/models', target: '/data/models', readOnly: true },
    ]);
  });
});
