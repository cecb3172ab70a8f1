/**
 * Where a model's weights and its adapters are, as the catalog takes them. Parsing a source is
 * models/source.ts's; the mistakes people make are named here with what to write instead.
 */
import { isLlmgwError, messageOf } from '../core/errors.js';
import { parseSource } from '../models/source.js';

import type { AdapterSpec } from './model-spec.js';

/**
 * What is wrong with a model's source, in words. Two mistakes are named with what to write: a
 * hub page address without its scheme, and a path relative to where they stand (the agents need
 * the same absolute path on every node).
 */
export function sourceProblem(source: string): string | undefined {
  const hub = /^(?:www\.)?huggingface\.co\/([^/@\s]+\/[^/@\s]+)/.exec(source);
  if (hub?.[1] !== undefined) return `write the Hugging Face repository as "hf://${hub[1]}"`;
  const relative =
    !source.includes('://') &&
    (/^[~.]/.test(source) ||
      /\.(gguf|safetensors|bin|pt|pth)$/i.test(source) ||
      source.split('/').length > 2);
  if (relative && !source.startsWith('/')) {
    return `"${source}" is a relative path: write an absolute path, as the agents see it on each node (e.g. /models/${source.replace(/^[~./]+/, '')})`;
  }
  try {
    parseSource(source);
    return undefined;
  } catch (e) {
    if (isLlmgwError(e)) return e.message;
    return messageOf(e);
  }
}

/**
 * What is wrong with an adapter's path. The engine opens it on each node as written: the agents
 * fetch a model's source, never its adapters, and engines run offline (HF_HUB_OFFLINE), so a
 * hub name or URL would fail at the engine's start. It is an absolute path, without "..".
 */
export function adapterPathProblem(a: AdapterSpec): string | undefined {
  const path = a.path.trim();
  const instead = `put the adapter's files at the same absolute path on every node and write that path (e.g. /adapters/${a.name})`;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path))
    return `"${path}" is not a path on the nodes: llmgw fetches a model's source, not its adapters; ${instead}`;
  if (!path.startsWith('/'))
    return `"${path}" is a relative path: write an absolute path, as the agents see it on each node (e.g. /adapters/${a.name})`;
  if (path.split('/').includes('..')) return `"${path}" has ".." in it: write the path without it`;
  return undefined;
}
