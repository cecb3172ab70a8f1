import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { engineNames } from '../src/engines/registry.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'src');

/**
 * What an engine is lives in its folder under src/engines/: nothing else compares an engine's
 * name (issue 26). Tests aside: they name engines to set up what they test.
 */

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return /\.tsx?$/.test(e.name) && !/\.(test|contract)\.tsx?$/.test(e.name) ? [path] : [];
  });
}

/** `=== 'vllm'`, `'vllm' !==`, `case 'vllm':`, and lists of names (`['vllm', 'sglang']`, a Set of them). */
function comparisons(text: string, names: readonly string[]): string[] {
  const name = `['"\`](?:${names.join('|')})['"\`]`;
  const patterns = [
    new RegExp(`[!=]==?\\s*${name}`, 'g'),
    new RegExp(`${name}\\s*[!=]==?`, 'g'),
    new RegExp(`case\\s+${name}`, 'g'),
    new RegExp(`${name}\\s*,\\s*${name}`, 'g'),
  ];
  return text.split('\n').flatMap((line, i) =>
    patterns.some((p) => {
      p.lastIndex = 0;
      return p.test(line);
    })
      ? [`${i + 1}: ${line.trim()}`]
      : [],
  );
}

describe("engines' names", () => {
  const found = new Map<string, string[]>();
  for (const file of sources(src)) {
    const rel = relative(root, file).split('\\').join('/');
    if (rel.startsWith('src/engines/')) continue;
    const lines = comparisons(readFileSync(file, 'utf8'), engineNames);
    if (lines.length > 0) found.set(rel, lines);
  }

  it('are compared nowhere in src/ outside src/engines/', () => {
    expect(Object.fromEntries(found)).toEqual({});
  });

  it('finds a comparison where there is one', () => {
    expect(
      comparisons('if (p.engine === \'vllm\') x();\nswitch (e) { case "sglang": }', engineNames),
    ).toHaveLength(2);
    expect(comparisons("const s = new Set(['vllm', 'sglang']);", engineNames)).toHaveLength(1);
    expect(comparisons("engineFor(p.engine).split === 'layer'", engineNames)).toEqual([]);
  });
});
