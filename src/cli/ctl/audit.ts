import type { Command } from 'commander';

import { stringOpt, type Runner } from '../command.js';
import { emit, table } from '../output.js';
import { UsageError } from '../usage-error.js';

import { connect } from './connection.js';
import { parseDuration } from './durations.js';

export function registerAudit(ctl: Command, run: Runner): void {
  ctl
    .command('audit')
    .description('who changed what, and when (newest first)')
    .option('--limit <n>', 'how many entries', '50')
    .option('--since <time>', 'entries since a time: an ISO time, or a duration back (30m, 2h, 7d)')
    .option('--actor <key>', "only this key's changes")
    .option('--target <target>', 'only changes of this (model/NAME, key/NAME)')
    .option('--action <action>', 'only this action (model.update, key.create, ...)')
    .action(
      run.action(async ({ opts, o, conn }) => {
        const limit = Number(stringOpt(opts, 'limit'));
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
          throw new UsageError('--limit is a whole number from 1 to 1000');
        const since = parseSince(stringOpt(opts, 'since'));
        const items = await connect(conn).audit({
          limit,
          since,
          ...(stringOpt(opts, 'actor') === undefined ? {} : { actor: stringOpt(opts, 'actor') }),
          ...(stringOpt(opts, 'target') === undefined ? {} : { target: stringOpt(opts, 'target') }),
          ...(stringOpt(opts, 'action') === undefined ? {} : { action: stringOpt(opts, 'action') }),
        });
        emit(o, { items }, (d) =>
          table(
            ['TIME', 'ACTOR', 'ACTION', 'TARGET', 'DETAIL'],
            d.items.map((e) => [e.at, e.actor, e.action, e.target, summarise(e.detail)]),
          ),
        );
      }),
    );
}

/** An ISO time, or a duration back from now: `90s`, `30m`, `2h`, `7d`. */
export function parseSince(value: string | undefined, now = Date.now()): string | undefined {
  if (value === undefined) return undefined;
  if (/^\d+[smhd]$/.test(value)) return new Date(now - parseDuration(value, '--since') * 1000).toISOString();
  const t = Date.parse(value);
  if (Number.isNaN(t))
    throw new UsageError(
      `--since ${value} is neither a time (2026-12-01T09:00:00Z) nor a duration (30m, 2h, 7d)`,
    );
  return new Date(t).toISOString();
}

function summarise(detail: Record<string, unknown>): string {
  const changes = detail['changes'];
  if (Array.isArray(changes)) {
    return (changes as { path: string; before?: unknown; after?: unknown }[])
      .map((c) => `${c.path}: ${short(c.before)} -> ${short(c.after)}`)
      .join('; ');
  }
  return Object.entries(detail)
    .filter(([k]) => k !== 'spec')
    .map(([k, v]) => `${k}=${short(v)}`)
    .join(' ');
}

function short(v: unknown): string {
  if (v === undefined) return '(none)';
  const s = JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}
