/**
 * Where a model's weights come from: a local path on the nodes, an http(s) URL, or a
 * Hugging Face repository (`hf://org/repo`, or one file in it: `hf://org/repo/file.gguf`).
 */
export type ModelSource =
  | { kind: 'path'; path: string }
  | { kind: 'url'; url: string }
  | { kind: 'hf'; repo: string; file: string | undefined };

const hfPattern =
  /^hf:\/\/(?<org>[A-Za-z0-9][A-Za-z0-9._-]*)\/(?<repo>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\/(?<file>.+))?$/;

export function parseSource(source: string): ModelSource | undefined {
  if (source.startsWith('/')) return { kind: 'path', path: source };
  if (source.startsWith('hf://')) {
    const m = hfPattern.exec(source);
    const org = m?.groups?.['org'];
    const repo = m?.groups?.['repo'];
    if (org === undefined || repo === undefined) return undefined;
    return { kind: 'hf', repo: `${org}/${repo}`, file: m?.groups?.['file'] };
  }
  if (/^https?:\/\//.test(source)) {
    try {
      return { kind: 'url', url: new URL(source).toString() };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

export function sourceProblem(source: string): string | undefined {
  if (parseSource(source) !== undefined) return undefined;
  const hf = /^(?:https?:\/\/)?huggingface\.co\/([^/]+\/[^/]+)/.exec(source);
  if (hf?.[1] !== undefined && !source.startsWith('http'))
    return `write the Hugging Face repository as "hf://${hf[1]}"`;
  if (source.startsWith('hf://')) {
    return `"${source}" is not a Hugging Face id: write hf://ORG/REPO or hf://ORG/REPO/FILE (e.g. hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf)`;
  }
  if (source.startsWith('~') || source.startsWith('.') || !source.includes('://')) {
    return `"${source}" is a relative path: write an absolute path, as the agents see it on each node (e.g. /models/${source.replace(/^[~./]+/, '')})`;
  }
  return `"${source}" is not a source llmgw reads: write an absolute path, an http(s) URL, or hf://ORG/REPO[/FILE]`;
}
