import { Document, LineCounter, parseDocument } from 'yaml';

import { yamlAliasProblem, yamlNestingProblem } from './yaml-bounds.js';

/** A YAML syntax error as a person fixes it: where, what the parser expected, and the line with a caret. */
export interface YamlSyntaxError {
  line: number;
  column: number;
  /** The parser's words, without its own position suffix (`must end with a ]`). */
  message: string;
  /** The line before (for context) and the line itself, numbered, with a caret under the column. */
  frame: string;
  /** Refused for its shape (nested too deep, aliases), not its syntax: the message says it all. */
  bound?: true;
}

/**
 * Parses YAML (JSON is YAML); the document, or its errors in the order of the text. A
 * document nested too deep is refused before it is parsed, and one whose aliases repeat too
 * much (or name no anchor) before its value is built: see yaml-bounds.ts.
 */
export function parseYamlText(text: string): {
  doc: Document;
  lineCounter: LineCounter;
  errors: YamlSyntaxError[];
} {
  const lineCounter = new LineCounter();
  const deep = yamlNestingProblem(text);
  if (deep !== undefined) return { doc: new Document(), lineCounter, errors: [boundError(text, deep)] };
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const errors: YamlSyntaxError[] = doc.errors
    .map((e) => {
      const { line, col } = lineCounter.linePos(e.pos[0]);
      return {
        line,
        column: col,
        message: e.message.split('\n')[0] ?? e.message,
        frame: codeFrame(text, line, col),
      };
    })
    .sort((a, b) => a.line - b.line || a.column - b.column);
  const aliases = errors.length > 0 ? undefined : yamlAliasProblem(doc, (o) => lineCounter.linePos(o));
  if (aliases !== undefined) errors.push(boundError(text, aliases));
  return { doc, lineCounter, errors };
}

/** The value of a document parseYamlText found no error in: its aliases are checked, so none is refused here. */
export function yamlValue(doc: Document): unknown {
  return doc.toJS({ maxAliasCount: -1 });
}

function boundError(text: string, p: { line: number; column: number; message: string }): YamlSyntaxError {
  return { ...p, frame: codeFrame(text, p.line, p.column), bound: true };
}

/** How much of a long line is shown on either side of the column. */
const reach = 60;

/**
 * ```
 *   1 | listen: [
 *   2 |
 *     | ^
 * ```
 */
export function codeFrame(text: string, line: number, column: number): string {
  const lines = text.split(/\r?\n/);
  const numbers = line > 1 ? [line - 1, line] : [line];
  const width = String(line).length;
  const out: string[] = [];
  const start = Math.max(0, column - 1 - reach);
  for (const n of numbers) {
    const full = lines[n - 1] ?? '';
    const shown = `${start > 0 ? '…' : ''}${full.slice(start, column - 1 + reach)}${full.length > column - 1 + reach ? '…' : ''}`;
    out.push(`${String(n).padStart(width)} | ${shown}`.trimEnd());
  }
  const current = lines[line - 1] ?? '';
  // Tabs kept, so the caret lines up under a tab-indented line too.
  const pad = `${start > 0 ? ' ' : ''}${current.slice(start, column - 1).replace(/[^\t]/g, ' ')}`;
  out.push(`${' '.repeat(width)} | ${pad}^`);
  return out.join('\n');
}
