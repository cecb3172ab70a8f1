import { safetensorsBytes } from '../models/config-shape.js';
import { type Known, known, unknown } from '../models/shape.js';
import type { PlanInput } from './plan-input.js';
import type { WeightLayout } from './types.js';

/**
 * The weights' bytes: the layout's sum, the shape's figure (a GGUF's tensor infos), the
 * caller's, or the files' (the `.safetensors` at the top of the repository, or the `.gguf`
 * files, split parts summed).
 */
export function weightBytes(
  input: Pick<PlanInput, 'shape' | 'weightBytes' | 'files' | 'layout'>,
): Known<number> {
  if (input.layout !== undefined) return known(layoutBytes(input.layout));
  if (input.shape.weightBytes.known) return input.shape.weightBytes;
  if (input.weightBytes !== undefined && input.weightBytes > 0) return known(input.weightBytes);
  if (input.files !== undefined) {
    const gguf = input.files.filter((f) => f.path.toLowerCase().endsWith('.gguf') && !/mmproj/i.test(f.path));
    if (gguf.length > 0) return known(gguf.reduce((s, f) => s + f.size, 0));
    const st = safetensorsBytes(input.files);
    if (st.known) return st;
  }
  return unknown(input.shape.weightBytes.reason);
}

export function layoutBytes(layout: WeightLayout): number {
  return layout.layers.reduce((s, b) => s + b, 0) + layout.input + layout.output;
}

/**
 * Where a GGUF's tensors go in llama.cpp, by name: `blk.N.*` is layer N; the token (and
 * position) embeddings stay in host memory; everything else (`output.weight`,
 * `output_norm.weight`, `rope_freqs`) goes with the output. Bytes per tensor are the caller's
 * (the ggml type's block size × elements).
 */
export function layoutFromTensors(tensors: readonly { name: string; bytes: number }[]): WeightLayout {
  const layers: number[] = [];
  let input = 0;
  let output = 0;
  for (const t of tensors) {
    const m = /^blk\.(\d+)\./.exec(t.name);
    if (m !== null) {
      const i = Number(m[1]);
      while (layers.length <= i) layers.push(0);
      layers[i] = (layers[i] ?? 0) + t.bytes;
    } else if (/^(token_embd|token_types|position_embd)\./.test(t.name)) {
      input += t.bytes;
    } else {
      output += t.bytes;
    }
  }
  return { layers, input, output };
}
