import type { Command } from 'commander';

import type { ModelView, ScaleView } from '../../protocol/model-views.js';
import { stringOpt, type Runner } from '../command.js';
import { emit } from '../output.js';
import { UsageError } from '../usage-error.js';

import { connect } from './connection.js';

/**
 * `llmgw ctl model autoscale MODEL --min N --max N [--target X] [--idle-s S]`: the model follows
 * load between min and max; `--off`: back to a fixed count (the one it runs now).
 */
export function registerModelAutoscale(model: Command, run: Runner): void {
  model
    .command('autoscale')
    .argument('<name>', 'the model')
    .option('--min <n>', 'fewest replicas (0: it stops after --idle-s without a request)')
    .option('--max <n>', 'most replicas')
    .option(
      '--target <load>',
      'load per replica to aim at, over 0 and at most 1 (0.7: 70% of its slots busy)',
    )
    .option('--idle-s <s>', 'with --min 0, seconds without a request before its last replica stops')
    .option('--off', 'stop autoscaling: it keeps the count it runs now')
    .description('scale a model on its load between --min and --max replicas, or --off for a fixed count')
    .action(
      run.action(async ({ opts, o, conn }, name: string) => {
        const client = connect(conn);
        const path = `/models/${encodeURIComponent(name)}/autoscale`;
        if (opts['off'] === true) {
          const given = ['min', 'max', 'target', 'idleS'].filter((k) => opts[k] !== undefined);
          if (given.length > 0)
            throw new UsageError('--off takes no bounds: give --off alone, or --min and --max without it');
          const m = (await client.request<ModelView>('DELETE', path)).body;
          emit(
            o,
            m,
            (v) =>
              `model "${v.name}" no longer autoscaled: it runs ${v.replicas} replica${v.replicas === 1 ? '' : 's'}`,
          );
          return;
        }
        const min = stringOpt(opts, 'min');
        const max = stringOpt(opts, 'max');
        if (min === undefined || max === undefined)
          throw new UsageError('give --min N and --max N (e.g. --min 0 --max 4), or --off for a fixed count');
        const target = stringOpt(opts, 'target');
        const idle = stringOpt(opts, 'idleS');
        const given = {
          min: whole('--min', min),
          max: whole('--max', max),
          ...(target === undefined ? {} : { target: number('--target', target) }),
          ...(idle === undefined ? {} : { idle_s: whole('--idle-s', idle) }),
        };
        // A target or idle time not given keeps the model's own, as kubectl's patches keep what they do not name.
        const now =
          target === undefined || idle === undefined
            ? (await client.request<ModelView>('GET', `/models/${encodeURIComponent(name)}`)).body.autoscale
            : undefined;
        const body = {
          ...(now === undefined ? {} : { target: now.target, idle_s: now.idle_s }),
          ...given,
        };
        const m = (await client.request<ModelView>('PUT', path, { json: body })).body;
        emit(o, m, autoscaledText);
      }),
    );
}

function whole(flag: string, text: string): number {
  if (!/^\d+$/.test(text))
    throw new UsageError(`${flag} is a whole number of 0 or more, such as 2 (got "${text}")`);
  return Number(text);
}

function number(flag: string, text: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n))
    throw new UsageError(`${flag} is a number, such as 0.7 (got "${text}")`);
  return n;
}

function autoscaledText(m: ModelView): string {
  const a = m.autoscale;
  if (a === undefined) return `model "${m.name}" is not autoscaled`;
  const zero = a.min === 0 ? `, to zero after ${a.idle_s} s without a request` : '';
  return `model "${m.name}" autoscaled: ${a.min} to ${a.max} replicas at ${a.target} load each${zero}`;
}

const label = (name: string) => `  ${name}:`.padEnd(20);

/** ctl model show's Scale section; undefined for a model with a fixed count. */
export function scaleLines(m: ModelView): string[] | undefined {
  const a = m.autoscale;
  if (a === undefined) return undefined;
  const s: ScaleView | undefined = m.status.scale;
  const now = s?.replicas ?? m.replicas;
  const zero = a.min === 0 ? `, to zero after ${a.idle_s} s without a request` : '';
  const lines = [
    `Scale:              autoscaled, ${a.min} to ${a.max} replicas, target ${a.target} load each${zero}`,
    `${label('Now')}${now} replica${now === 1 ? '' : 's'}`,
  ];
  const d = s?.last_decision;
  if (d === undefined) lines.push(`${label('Last decision')}none yet`);
  else {
    lines.push(`${label('Last decision')}${d.from} → ${d.to} (${d.direction}) at ${d.at}: ${d.reason}`);
    const figures = Object.entries(d.figures)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    if (figures !== '') lines.push(`${label('Figures')}${figures}`);
  }
  if (s?.last_request_at !== undefined) lines.push(`${label('Last request')}${s.last_request_at}`);
  if (s?.cold_start !== undefined)
    lines.push(`${label('Cold start')}${s.cold_start.ms} ms to the first token (${s.cold_start.at})`);
  return lines;
}
