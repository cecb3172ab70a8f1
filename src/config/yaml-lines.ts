import { isMap, isPair, isScalar, isSeq, type LineCounter, type Node } from 'yaml';

/**
 * The line (1-based) of the deepest node along a path in a parsed YAML document: the key itself
 * when the path ends at one. Shared by the settings loader and the console's model form (it
 * imports nothing but `yaml`, so it runs in the browser too).
 */
export function lineOf(
  root: unknown,
  counter: LineCounter,
  path: readonly (string | number)[],
): number | undefined {
  let node = root;
  let line = rangeLine(node, counter);
  for (const part of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === part);
      if (pair === undefined) return line;
      line = rangeLine(pair.key, counter) ?? line;
      node = pair.value;
    } else if (isSeq(node) && typeof part === 'number') {
      node = node.items[part];
      line = rangeLine(node, counter) ?? line;
    } else {
      return line;
    }
  }
  return line;
}

function rangeLine(node: unknown, counter: LineCounter): number | undefined {
  const range = (node as Node | null | undefined)?.range;
  return range === undefined || range === null ? undefined : counter.linePos(range[0]).line;
}
