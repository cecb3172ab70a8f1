/**
 * The add form's YAML: parsed in the page (the `yaml` package, as `ctl model add -f` reads the
 * file) and sent as JSON; the server's issues (`profiles[0].gpu_class`) placed at their line.
 */
import { LineCounter, parseDocument } from 'yaml';

import { lineOf } from '../../../src/config/yaml-lines.js';

export type Parsed =
  | { ok: true; value: unknown }
  /** line is 1-based; undefined when the parser could not tell. */
  | { ok: false; message: string; line?: number };

/** The text as a model definition: one YAML document holding a mapping. */
export function parseModelYaml(text: string): Parsed {
  if (text.trim() === '') return { ok: false, message: 'write the model definition (YAML) first' };
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const [error] = doc.errors;
  if (error !== undefined) {
    const at = error.linePos?.[0]?.line ?? lineCounter.linePos(error.pos[0]).line;
    return { ok: false, message: firstLine(error.message), line: at };
  }
  const value: unknown = doc.toJS();
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return {
      ok: false,
      message:
        'a model definition is a mapping (name:, source:, profiles:), as llmgw ctl model add -f takes it',
      line: 1,
    };
  }
  return { ok: true, value };
}

function firstLine(text: string): string {
  return text.split('\n')[0] ?? text;
}

/** `profiles[0].gpu_class` → ['profiles', 0, 'gpu_class'] (core/errors.ts formatPath, read back). */
export function pathParts(path: string): (string | number)[] {
  const parts: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (m[2] !== undefined) parts.push(Number(m[2]));
    else if (m[1] !== undefined) parts.push(m[1]);
  }
  return parts;
}

export interface PlacedIssue {
  path: string;
  message: string;
  /** The line of the deepest key along the path that the text has; undefined when none. */
  line?: number;
}

/** Each issue of the server's refusal at the line of its field in the text sent. */
export function placeIssues(
  text: string,
  issues: readonly { path: string; message: string }[],
): PlacedIssue[] {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  return issues.map((i) => {
    const line = doc.errors.length > 0 ? undefined : lineOf(doc.contents, lineCounter, pathParts(i.path));
    return line === undefined ? { path: i.path, message: i.message } : { ...i, line };
  });
}
