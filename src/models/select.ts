/**
 * Which files of a hub repository a model is: pure rules over the tree listing, so they are table-tested.
 * A GGUF file brings its split parts and the repository's mmproj; a safetensors repository brings its
 * config, tokenizer and one set of weights (the sharded set of the index, never consolidated as well).
 */
import { LlmgwError } from '../core/errors.js';
import { formatSize } from './source.js';

export interface TreeFile {
  path: string;
  size: number;
  /** The git blob id. */
  oid: string;
  /** For an LFS file: its sha256 and size. */
  lfs?: { oid: string; size: number };
}

export interface SelectInput {
  /** The source as the user wrote it without a file, for messages: `hf://ORG/REPO[@REV]`. */
  label: string;
  /** What the label's revision is, for messages: `main (commit abc123)`. */
  at: string;
  tree: readonly TreeFile[];
  file?: string;
  /** The weight files named by model.safetensors.index.json, when it was read. */
  indexFiles?: readonly string[];
}

const split = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;
const isGguf = (p: string) => p.toLowerCase().endsWith('.gguf');
const baseName = (p: string) => p.slice(p.lastIndexOf('/') + 1);
const dirName = (p: string) => p.slice(0, Math.max(p.lastIndexOf('/'), 0));
const isMmproj = (p: string) => isGguf(p) && baseName(p).toLowerCase().includes('mmproj');

/** The files beside the weights a safetensors model needs (root of the repository). */
export const companionFiles = new Set([
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'tokenizer.model',
  'special_tokens_map.json',
  'added_tokens.json',
  'vocab.json',
  'merges.txt',
  'chat_template.json',
  'chat_template.jinja',
  'preprocessor_config.json',
  'processor_config.json',
]);

/** Split parts of one GGUF, in order; refuses a set with a part missing. */
function splitParts(input: SelectInput, file: string): TreeFile[] {
  const m = split.exec(file);
  const one = input.tree.find((f) => f.path === file);
  if (!m || !one) return one ? [one] : [];
  const [, stem = '', , total = ''] = m;
  const parts: TreeFile[] = [];
  for (let i = 1; i <= Number(total); i++) {
    const path = `${stem}-${String(i).padStart(5, '0')}-of-${total}.gguf`;
    const part = input.tree.find((f) => f.path === path);
    if (!part) {
      throw new LlmgwError(
        'not_found',
        `${input.label} has no part ${path} of the split GGUF ${file} at ${input.at}`,
      );
    }
    parts.push(part);
  }
  return parts;
}

/** The projector for a multimodal GGUF: the one beside the file, F16 before other types. */
function mmprojFor(tree: readonly TreeFile[], file: string): TreeFile | undefined {
  const order = ['f16', 'bf16', 'f32', 'q8_0'];
  const rank = (f: TreeFile) => {
    const near = dirName(f.path) === dirName(file) ? 0 : 100;
    const i = order.findIndex((t) => baseName(f.path).toLowerCase().includes(t));
    return near + (i === -1 ? order.length : i);
  };
  return tree
    .filter((f) => isMmproj(f.path))
    .sort((a, b) => rank(a) - rank(b) || a.path.localeCompare(b.path))[0];
}

/** The GGUF models of a repository, a split one once with its total size: `X-Q4_K_M.gguf (4.7 GB)`. */
export function ggufChoices(tree: readonly TreeFile[]): string[] {
  const sizes = new Map<string, number>();
  for (const f of tree) {
    if (!isGguf(f.path) || isMmproj(f.path)) continue;
    const m = split.exec(f.path);
    const key = m ? `${m[1] ?? ''}-00001-of-${m[3] ?? ''}.gguf` : f.path;
    sizes.set(key, (sizes.get(key) ?? 0) + f.size);
  }
  return [...sizes].sort(([a], [b]) => a.localeCompare(b)).map(([p, s]) => `${p} (${formatSize(s)})`);
}

function safetensorsWeights(input: SelectInput, root: readonly TreeFile[]): TreeFile[] {
  const index = root.find((f) => f.path === 'model.safetensors.index.json');
  const weights = root.filter((f) => f.path.endsWith('.safetensors'));
  if (index) {
    const names =
      input.indexFiles ??
      weights.filter((f) => /-\d{5}-of-\d{5}\.safetensors$/.test(f.path)).map((f) => f.path);
    const shards = [...new Set(names)].sort().map((n) => {
      const f = root.find((r) => r.path === n);
      if (!f) {
        throw new LlmgwError(
          'not_found',
          `${input.label}: model.safetensors.index.json names ${n}, which the repository does not have at ${input.at}`,
        );
      }
      return f;
    });
    if (shards.length > 0) return [index, ...shards];
  }
  const plain = weights.filter((f) => !f.path.startsWith('consolidated'));
  return plain.length > 0 ? plain : weights;
}

/** The files the source names; refuses, in words, what names no model or is missing. */
export function selectFiles(input: SelectInput): TreeFile[] {
  const files = input.tree;
  if (input.file !== undefined) {
    const file = input.file;
    if (!files.some((f) => f.path === file)) {
      throw new LlmgwError('not_found', `${input.label} has no file ${file} at ${input.at}`);
    }
    if (!isGguf(file) || isMmproj(file)) return splitParts(input, file);
    const parts = splitParts(input, file);
    const first = parts[0]?.path ?? file;
    const mmproj = mmprojFor(files, first);
    return mmproj ? [...parts, mmproj] : parts;
  }
  const choices = ggufChoices(files);
  if (choices.length > 0) {
    const [org = '', rest = ''] = input.label.split('@');
    const rev = rest === '' ? '' : `@${rest}`;
    throw new LlmgwError(
      'invalid_argument',
      `${input.label} holds GGUF files: name one file: ${org}/FILE${rev}; this repository has: ${choices.join(', ')}`,
    );
  }
  const root = files.filter((f) => !f.path.includes('/'));
  const weights = safetensorsWeights(input, root);
  if (weights.length === 0) {
    throw new LlmgwError(
      'invalid_argument',
      `${input.label} has no GGUF or safetensors files at ${input.at}: llmgw serves one of those; name a repository that has them`,
    );
  }
  const companions = root.filter((f) => companionFiles.has(f.path));
  return [...companions, ...weights];
}
