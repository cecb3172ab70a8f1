/** The Models view's words for a model: its origin, shape, profiles and rolling change. */
import type { ModelView, RolloutView } from '../api.js';

/** Bytes in the units `ctl model show` uses (1024-based). */
export function sizeText(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

/** `main @ 0123abc, 4 files, 14.2 GiB`; or why the origin is not known (yet). */
export function originText(m: ModelView): string {
  const o = m.status.origin;
  if (o === undefined) return m.status.problem ?? 'being resolved';
  const bytes = o.files.reduce((n, f) => n + f.size, 0);
  const files = `${o.files.length} file${o.files.length === 1 ? '' : 's'}, ${sizeText(bytes)}`;
  const pin = [o.revision === '' ? undefined : o.revision, o.commit?.slice(0, 7)].filter(
    (x) => x !== undefined,
  );
  return pin.length === 0 ? files : `${pin.join(' @ ')}, ${files}`;
}

/** `llama, 32 layers, 8B parameters, Q4_K_M, trained for 131072 tokens`; or why not known. */
export function shapeText(m: ModelView): string {
  const s = m.status.shape;
  if (s === undefined) return m.status.problem ?? 'not known yet';
  const parts = [s.architecture];
  if (s.layers.known) parts.push(`${s.layers.value} layers`);
  if (s.parameters.known) parts.push(`${paramsText(s.parameters.value)} parameters`);
  if (s.dtype.known) parts.push(s.dtype.value);
  if (s.trainedContext.known) parts.push(`trained for ${s.trainedContext.value} tokens`);
  return parts.join(', ');
}

function paramsText(n: number): string {
  if (n >= 1e9) return `${+(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  return String(n);
}

/** `l4: vllm on 2 × l4-24g (tp 2)`, `cpu: llamacpp on CPUs`. */
export function profileText(p: ModelView['profiles'][number]): string {
  if (p.cpu === true) return `${p.name}: ${p.engine} on CPUs`;
  const cards = p.gpus_per_node * p.nodes;
  const on = `${cards === 1 ? '' : `${cards} × `}${p.gpu_class ?? 'any class'}`;
  const split = [
    p.tp > 1 ? `tp ${p.tp}` : '',
    p.pp > 1 ? `pp ${p.pp}` : '',
    p.nodes > 1 ? `${p.nodes} nodes` : '',
  ]
    .filter((x) => x !== '')
    .join(', ');
  return `${p.name}: ${p.engine} on ${on}${split === '' ? '' : ` (${split})`}`;
}

export const isDeclared = (m: ModelView) => m.metadata.origin === 'config';

/** `gpus 1 → 2 (surge): 1 of 2 replicas`, with the failure's error; undefined once done. */
export function rolloutText(r: RolloutView | undefined): string | undefined {
  if (r === undefined || r.state === 'done') return undefined;
  const head = `${r.change} (${r.mode}, by ${r.by})`;
  if (r.state === 'failed') return `${head} failed${r.error === undefined ? '' : `: ${r.error}`}`;
  return `${head}: ${r.replaced} of ${r.total} replica${r.total === 1 ? '' : 's'} running it`;
}

/** The GPU profiles a GPUs… change may name; the CPU ones have no cards. */
export function gpuProfiles(m: ModelView): string[] {
  return m.profiles.filter((p) => p.cpu !== true && p.gpu_class !== undefined).map((p) => p.name);
}

/**
 * An autoscaled model's Scale section, as `ctl model show` has it: the bounds, the count now,
 * the last decision (before → after, why, the figures) and the last request and cold start.
 */
export function scaleRows(m: ModelView): [string, string][] | undefined {
  const a = m.autoscale;
  if (a === undefined) return undefined;
  const s = m.status.scale;
  const now = s?.replicas ?? m.replicas;
  const rows: [string, string][] = [
    [
      'Bounds',
      `${a.min} to ${a.max} replicas, target ${a.target} load each${a.min === 0 ? `, to zero after ${a.idle_s} s without a request` : ''}`,
    ],
    ['Now', `${now} replica${now === 1 ? '' : 's'}`],
  ];
  const d = s?.last_decision;
  rows.push([
    'Last decision',
    d === undefined ? 'none yet' : `${d.from} → ${d.to} (${d.direction}) at ${d.at}: ${d.reason}`,
  ]);
  if (d !== undefined && Object.keys(d.figures).length > 0)
    rows.push([
      'Figures',
      Object.entries(d.figures)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    ]);
  if (s?.last_request_at !== undefined) rows.push(['Last request', s.last_request_at]);
  if (s?.cold_start !== undefined)
    rows.push(['Cold start', `${s.cold_start.ms} ms to the first token (${s.cold_start.at})`]);
  return rows;
}
