/**
 * Secrets in the settings file (`hub.token`) as the API shows it: hidden behind a placeholder,
 * and put back when the file comes back with the placeholder unchanged, so that `llmgw ctl
 * config edit` neither shows the token nor loses it. Replaced by source range, so the rest of
 * the file (comments, quoting, order) stays exactly as written.
 */
import { createHash } from 'node:crypto';

import { isScalar, type Document } from 'yaml';

import { LlmgwError } from '../core/errors.js';

import type { Settings } from './load.js';
import { parseYamlText } from './yaml-error.js';

/** What a secret's value reads as in the text the API returns. */
export const hiddenSecret = '(hidden)';

const secretPaths: readonly (readonly string[])[] = [['hub', 'token']];

interface Located {
  value: unknown;
  /** The value's text: start, end. */
  range?: [number, number];
}

function locate(doc: Document, text: string, path: readonly string[]): Located | undefined {
  const node = doc.getIn(path, true);
  if (node === undefined || node === null) return undefined;
  if (isScalar(node)) {
    if (!node.range) return { value: node.value };
    const [start, end] = node.range;
    // A block scalar's range takes the line break after it: that stays.
    return { value: node.value, range: [start, start + text.slice(start, end).trimEnd().length] };
  }
  // An alias or a collection: known by its value only.
  return { value: doc.getIn(path) };
}

/** Parsed within the bounds the settings are held to (yaml-bounds.ts): this runs before they are validated. */
function parse(text: string): Document | undefined {
  const { doc, errors } = parseYamlText(text);
  return errors.length > 0 ? undefined : doc;
}

function replaceRanges(text: string, edits: { range: [number, number]; text: string }[]): string {
  let out = text;
  for (const e of [...edits].sort((a, b) => b.range[0] - a.range[0])) {
    out = out.slice(0, e.range[0]) + e.text + out.slice(e.range[1]);
  }
  return out;
}

/** The settings text with each secret's value replaced by the placeholder (also where it is repeated). */
export function hideSecrets(text: string): string {
  const doc = parse(text);
  if (doc === undefined) return text;
  const found = secretPaths.map((p) => locate(doc, text, p)).filter((l) => l !== undefined);
  const edits = found.flatMap((l) => (l.range ? [{ range: l.range, text: hiddenSecret }] : []));
  let out = replaceRanges(text, edits);
  // A value repeated elsewhere (a comment, an anchor) is hidden too.
  for (const l of found) {
    if (typeof l.value === 'string' && l.value.length >= 4) out = out.split(l.value).join(hiddenSecret);
  }
  return out;
}

/**
 * The edited text with each secret left as the placeholder put back to the value in `current`
 * (the file as it is). Refused where the placeholder stands for a secret the file does not hold.
 */
export function restoreSecrets(edited: string, current: string): string {
  const doc = parse(edited);
  if (doc === undefined) return edited; // refused as YAML further on, placeholder and all
  const now = parse(current);
  const edits: { range: [number, number]; text: string }[] = [];
  for (const path of secretPaths) {
    const given = locate(doc, edited, path);
    if (given?.value !== hiddenSecret || given.range === undefined) continue;
    const held = now === undefined ? undefined : locate(now, current, path);
    if (held === undefined || typeof held.value !== 'string' || held.value === hiddenSecret) {
      throw new LlmgwError(
        'invalid_argument',
        `${path.join('.')} is "${hiddenSecret}", which stands for the token the settings file holds, but it holds none: write the token itself, or remove ${path.join('.')}`,
      );
    }
    const text = held.range ? current.slice(held.range[0], held.range[1]) : JSON.stringify(held.value);
    edits.push({ range: given.range, text });
  }
  return replaceRanges(edited, edits);
}

/** The settings with each secret replaced by a short digest: for an audit entry, which must not hold it. */
export function withoutSecrets(settings: Settings): unknown {
  const copy = structuredClone(settings) as unknown as Record<string, Record<string, unknown>>;
  for (const path of secretPaths) {
    const [section = '', key = ''] = path;
    const value = copy[section]?.[key];
    if (typeof value === 'string' && copy[section] !== undefined) {
      copy[section][key] = `(set, sha256 ${createHash('sha256').update(value).digest('hex').slice(0, 8)})`;
    }
  }
  return copy;
}
