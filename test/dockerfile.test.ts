import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

/** The image's base: one Node LTS, pinned by digest, for both stages (docs/install.md). */

const dockerfile = readFileSync(fileURLToPath(new URL('../Dockerfile', import.meta.url)), 'utf8');
const lines = dockerfile.split('\n');

describe('Dockerfile', () => {
  it('pins its base by digest to a Node 24 image', () => {
    const arg = lines.find((l) => l.startsWith('ARG NODE_IMAGE='));
    expect(arg).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim@sha256:[0-9a-f]{64}$/);
  });

  it('builds and runs on that one base', () => {
    const froms = lines.filter((l) => l.startsWith('FROM '));
    expect(froms).toEqual(['FROM ${NODE_IMAGE} AS build', 'FROM ${NODE_IMAGE}']);
  });

  it('says how to update the digest', () => {
    expect(dockerfile).toContain('docker buildx imagetools inspect node:24-bookworm-slim');
  });
});
