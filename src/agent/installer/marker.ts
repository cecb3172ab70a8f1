import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

import { isExecutable } from '../which.js';

import { llamaFlavours, type LlamaFlavour } from './llama-asset.js';

/** Written beside the binary last, before the directory is moved into place: its presence means checked. */
export const MARKER = '.llmgw-installed.json';

export interface Marker {
  build: string;
  flavour: LlamaFlavour;
  version: string;
  checksum: 'verified' | 'not published';
  sha256: string;
  source: string;
  installed_at: string;
}

export async function readMarker(dir: string): Promise<Marker | undefined> {
  try {
    return parseMarker(await readFile(join(dir, MARKER), 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * The agent's checked install of this build and flavour under the data dir, as the doctor
 * sees it without running anything: its marker matches and its llama-server is executable.
 */
export function installedBuild(
  dataDir: string,
  build: string,
  flavour: LlamaFlavour,
): { bin: string; build: string; flavour: LlamaFlavour; version: string } | undefined {
  const dir = resolve(dataDir, 'engines', 'llamacpp', `${build}-${flavour}`);
  let marker: Marker | undefined;
  try {
    marker = parseMarker(readFileSync(join(dir, MARKER), 'utf8'));
  } catch {
    return undefined;
  }
  const bin = join(dir, 'llama-server');
  if (marker?.build !== build || marker.flavour !== flavour || !isExecutable(bin)) return undefined;
  return { bin, build, flavour, version: marker.version };
}

function parseMarker(text: string): Marker | undefined {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== 'object' || v === null) return undefined;
    const m = v as Record<string, unknown>;
    const strings = ['build', 'flavour', 'version', 'checksum', 'sha256', 'source', 'installed_at'] as const;
    if (!strings.every((k) => typeof m[k] === 'string')) return undefined;
    if (!llamaFlavours.includes(m['flavour'] as LlamaFlavour)) return undefined;
    if (m['checksum'] !== 'verified' && m['checksum'] !== 'not published') return undefined;
    return v as Marker;
  } catch {
    return undefined;
  }
}
