/**
 * `llmgw ctl model show NAME`: a model as a person reads it. The definition in short, then what
 * its source resolved to (revision, commit, files) and what the model is (its shape), each
 * figure llmgw could not read shown as unknown with the reason.
 */
import type { Origin } from '../../models/origin.js';
import type { PlanAnswer } from '../../planner/index.js';
import type { Known, ModelShape, SlidingWindow } from '../../models/shape.js';
import { formatSize } from '../../models/source.js';
import { progressText, type NodeDownload } from '../../protocol/cache-views.js';
import type { ModelView } from '../../protocol/model-views.js';
import type { ReplicaView } from '../../protocol/replica-views.js';
import type { RolloutView } from '../../protocol/rollout-views.js';
import { age, table } from '../output.js';

import { scaleLines } from './model-autoscale.js';

const label = (name: string) => `${name}:`.padEnd(20);

/** `l4:vllm@l4-24g,cpu:llamacpp@cpu`: each profile's name, engine and device class (and container image). */
export function profilesSummary(m: ModelView): string {
  return m.profiles
    .map(
      (p) =>
        `${p.name}:${p.engine}@${p.cpu === true ? 'cpu' : (p.gpu_class ?? '?')}${p.runtime === 'container' ? `[container${p.image === undefined ? '' : ` ${p.image}`}]` : ''}`,
    )
    .join(',');
}

function show<T>(k: Known<T>, text: (v: T) => string): string {
  return k.known ? text(k.value) : `unknown (${k.reason})`;
}

/** 8.03 B, 494 M: a parameter count as model cards write it. */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(0)} M`;
  return String(n);
}

const ordinal = (n: number) => (n === 2 ? '2nd' : n === 3 ? '3rd' : `${n}th`);

/**
 * Which layers, in a few words: `all 32`, `21 of 42: 0, 2, … 40 (every 2nd)`, `8 of 28: 20-27`.
 */
export function layersSummary(layers: readonly number[], total: number | undefined): string {
  const n = layers.length;
  const of = total === undefined ? `${n}` : `${n} of ${total}`;
  if (n === 0) return 'none';
  if (total !== undefined && n === total) return `all ${total}`;
  const first = layers[0] ?? 0;
  const step = (layers[1] ?? first) - first;
  const even = n > 3 && step > 1 && layers.every((l, i) => l === first + i * step);
  if (even) return `${of}: ${first}, ${first + step}, … ${layers[n - 1] ?? 0} (every ${ordinal(step)})`;
  const ranges: string[] = [];
  let start = first;
  let prev = first;
  for (const l of [...layers.slice(1), Number.NaN]) {
    if (l === prev + 1) {
      prev = l;
      continue;
    }
    ranges.push(start === prev ? `${start}` : `${start}-${prev}`);
    start = l;
    prev = l;
  }
  return `${of}: ${ranges.join(', ')}`;
}

function slidingText(sw: SlidingWindow | null, layers: Known<number>): string {
  if (sw === null) return 'none';
  return `${sw.window} tokens, on layers ${layersSummary(sw.layers, layers.known ? layers.value : undefined)}`;
}

function digestOf(o: Origin, f: Origin['files'][number]): string {
  if (f.sha256 !== undefined) return `sha256 ${f.sha256.slice(0, 12)}`;
  // A small hub file is known by its git blob id; a URL by its ETag.
  if (f.etag !== undefined)
    return `${o.kind === 'hf' ? 'git' : 'etag'} ${f.etag.replace(/"/g, '').slice(0, 12)}`;
  return '-';
}

function originLines(o: Origin): string[] {
  const lines: string[] = [];
  if (o.kind === 'hf') {
    lines.push(`${label('Revision')}${o.revision}`);
    if (o.commit !== undefined) lines.push(`${label('Commit')}${o.commit}`);
  } else if (o.kind === 'url' && o.revision !== '') {
    lines.push(`${label('ETag')}${o.revision}`);
  }
  const total = o.files.reduce((sum, f) => sum + f.size, 0);
  lines.push(
    `${label('Size')}${formatSize(total)} in ${o.files.length} file${o.files.length === 1 ? '' : 's'}`,
  );
  lines.push('', 'Files:');
  const rows = table(
    ['PATH', 'SIZE', 'DIGEST'],
    o.files.map((f) => [f.path, formatSize(f.size), digestOf(o, f)]),
  );
  lines.push(...rows.split('\n').map((l) => `  ${l}`));
  return lines;
}

function shapeLines(s: ModelShape): string[] {
  const heads = show(s.attentionHeads, (h) => `${h}`);
  const kvHeads =
    s.kvHeadsPerLayer !== undefined
      ? show(s.kvHeads, (h) => `up to ${h}, by layer`)
      : show(s.kvHeads, (h) => `${h}`);
  const kv = show(s.kv, (k) => {
    const split =
      k.slidingPerToken > 0
        ? ` (full attention ${k.fullPerToken} B, sliding window ${k.slidingPerToken} B)`
        : '';
    return `${k.perToken} B per token at ${k.elementBytes} bytes a value${split}`;
  });
  return [
    `Shape (from ${s.from === 'gguf' ? 'the GGUF header' : 'config.json'}):`,
    `  ${label('Architecture')}${s.architecture}`,
    `  ${label('Layers')}${show(s.layers, String)}`,
    `  ${label('Attention heads')}${heads}; KV heads ${kvHeads}`,
    `  ${label('Head dims')}key ${show(s.keyHeadDim, String)}, value ${show(s.valueHeadDim, String)}`,
    `  ${label('Sliding window')}${show(s.slidingWindow, (sw) => slidingText(sw, s.layers))}`,
    `  ${label('MLA latent')}${show(s.mla, (m) => (m === null ? 'none' : `${m.kvLoraRank} + rope ${m.qkRopeHeadDim}`))}`,
    `  ${label('Trained context')}${show(s.trainedContext, (c) => `${c} tokens`)}`,
    `  ${label('Parameters')}${show(s.parameters, formatCount)}`,
    `  ${label('Weights')}${show(s.weightBytes, formatSize)}`,
    `  ${label('Dtype')}${show(s.dtype, String)}`,
    `  ${label('KV cache')}${kv}`,
  ];
}

/** A change rolling over a model, in one line: what, how, by whom, and how far or why it failed. */
export function changeText(r: RolloutView): string {
  const what = `${r.change}, ${r.mode}, by ${r.by}`;
  if (r.state === 'failed') return `${what}: failed: ${r.error ?? 'no reason given'}`;
  if (r.state === 'done') return `${what}: done`;
  return `${what}: ${r.replaced} of ${r.total} replica${r.total === 1 ? '' : 's'} replaced`;
}

/** The sections of `model show`, in order; more (replicas, downloads) are added after these. */
export function modelSections(m: ModelView): string[][] {
  const by =
    m.metadata.origin === 'config'
      ? 'declared in the settings file'
      : `added through the API by ${m.metadata.created_by ?? '?'}, version ${m.metadata.version ?? '?'}`;
  const head = [
    `${label('Name')}${m.name} (${by})`,
    `${label('Source')}${m.source}`,
    `${label('Replicas')}${m.replicas}`,
    `${label('Profiles')}${profilesSummary(m)}`,
  ];
  const st = m.status;
  if (st.resolved_at !== undefined)
    head.push(`${label('Resolved')}${st.resolved_at} (${age(st.resolved_at)} ago)`);
  if (st.rollout !== undefined && st.rollout.state !== 'done')
    head.push(`${label('Change')}${changeText(st.rollout)}`);
  const sections = [head];
  if (st.origin !== undefined) sections[0] = [...head, ...originLines(st.origin)];
  else if (st.resolved_at === undefined)
    head.push(`${label('Origin')}not resolved yet (llmgw ctl model resolve ${m.name} resolves it now)`);
  else head.push(`${label('Origin')}unknown`);
  const scale = scaleLines(m);
  if (scale !== undefined) sections.push(scale);
  if (st.shape !== undefined) sections.push(shapeLines(st.shape));
  else sections.push(['Shape:              unknown']);
  if (st.problem !== undefined) sections.push([`Problem: ${st.problem}`]);
  return sections;
}

/** What runs of a model now: its replicas (a downloading one with its progress), and its nodes' downloads. */
export interface ModelLive {
  replicas?: readonly ReplicaView[];
  downloads?: readonly NodeDownload[];
  /** What `llmgw ctl plan NAME` answers, or why it could not. */
  plan?: PlanAnswer | { error: string };
}

/**
 * Whether each of the model's profiles fits the cluster, as `ctl plan` answers: one line a
 * profile and class, the need a card against the budget, the longest context, or why not.
 */
export function memoryLines(plan: PlanAnswer | { error: string }): string[] {
  if ('error' in plan) return [`${label('Memory')}not planned: ${plan.error}`];
  const mine = plan.options.filter((p) => p.profile !== null);
  if (mine.length === 0) return [`${label('Memory')}no profile runs on the cluster's classes`];
  const at = plan.context === null ? '' : ` at ${plan.context} tokens`;
  return [
    `Memory${at} (llmgw ctl plan ${plan.model} for every engine and class):`,
    ...mine.map((p) => {
      const where = p.class === 'cpu' ? `${p.engine} on cpu` : `${p.engine} on ${p.class} ×${p.cards}`;
      const need =
        p.need_gib === null
          ? ''
          : `, ${p.need_gib.toFixed(1)}${p.budget_gib === null ? '' : ` of ${p.budget_gib.toFixed(1)}`} GiB ${p.class === 'cpu' ? 'of RAM' : 'a card'}`;
      const longest = p.max_context === null ? '' : `, a context up to ${p.max_context} fits`;
      const verdict = p.fits ? `fits${need}${longest}` : `does not fit: ${p.reason ?? 'no reason given'}`;
      return `  ${p.profile ?? '-'}  ${where}: ${verdict}`;
    }),
  ];
}

function replicaLines(replicas: readonly ReplicaView[]): string[] {
  if (replicas.length === 0) return ['Replicas:           none running'];
  return [
    'Replicas:',
    ...replicas.map((r) => {
      const where = r.node === undefined ? '' : ` on ${r.node}`;
      const progress = r.download === undefined ? '' : ` (${progressText(r.download)})`;
      const why = r.download === undefined && r.reason !== undefined ? `: ${r.reason}` : '';
      return `  ${r.id ?? '(waiting for room)'}  ${r.state}${progress}${where}${why}`;
    }),
  ];
}

function downloadLines(downloads: readonly NodeDownload[]): string[] {
  return [
    'Downloads:',
    ...downloads.map((d) => {
      const detail = d.state === 'failed' ? (d.error ?? 'failed') : progressText(d);
      return `  ${d.node}  ${d.state}, ${detail}`;
    }),
  ];
}

/** What runs of a model now, section by section, after what the model is. */
export function liveSections(live: ModelLive): string[][] {
  const sections: string[][] = [];
  if (live.replicas !== undefined) sections.push(replicaLines(live.replicas));
  if (live.downloads !== undefined && live.downloads.length > 0) sections.push(downloadLines(live.downloads));
  if (live.plan !== undefined) sections.push(memoryLines(live.plan));
  return sections;
}

export function modelDetail(m: ModelView, live: ModelLive = {}): string {
  return [...modelSections(m), ...liveSections(live)].map((s) => s.join('\n')).join('\n\n');
}
