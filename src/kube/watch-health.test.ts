import { describe, expect, it } from 'vitest';

import { LlmgwError } from '../core/errors.js';

import {
  classifyWatchFailure,
  SilentWatchError,
  WatchHealth,
  WatchStatusError,
  type WatchLogger,
} from './watch-health.js';

const status = (code: number, message: string) => JSON.stringify({ kind: 'Status', code, message });

describe('classifyWatchFailure', () => {
  const rows: { e: unknown; kind: string; message: string; gone: boolean }[] = [
    {
      e: new WatchStatusError(500, status(500, 'Internal error occurred: etcdserver: request timed out')),
      kind: 'http 500',
      message: 'the API server answered 500: Internal error occurred: etcdserver: request timed out',
      gone: false,
    },
    {
      e: new WatchStatusError(410, status(410, 'too old resource version: 5 (9)')),
      kind: 'http 410',
      message: 'the API server answered 410: too old resource version: 5 (9)',
      gone: true,
    },
    {
      e: new SilentWatchError({ timeoutSeconds: 300, waitedSeconds: 330 }),
      kind: 'silent',
      message:
        'the watch was still open after 330 s though the server was asked to end it after 300 s: its connection is taken as dead',
      gone: false,
    },
    {
      e: Object.assign(new Error('aborted'), { code: 'ECONNRESET' }),
      kind: 'ECONNRESET',
      message: 'the connection failed: aborted',
      gone: false,
    },
    {
      e: new LlmgwError('permission_denied', 'the ServiceAccount may not list pods'),
      kind: 'list permission_denied',
      message: 'the ServiceAccount may not list pods',
      gone: false,
    },
  ];
  it.each(rows)('$kind', ({ e, kind, message, gone }) => {
    expect(classifyWatchFailure(e)).toEqual({ kind, message, gone });
  });
});

describe('WatchHealth', () => {
  const failure = (kind: string) => ({ kind, message: `${kind} happened`, gone: false });
  it.each([
    { steps: ['working'], lines: [] },
    { steps: ['http 500', 'http 500', 'http 500'], lines: ['warn http 500'] },
    {
      steps: ['http 500', 'http 500', 'working', 'working'],
      lines: ['warn http 500', 'info works again (after 2 failed tries)'],
    },
    {
      steps: ['ECONNRESET', 'http 500', 'http 500', 'working'],
      lines: ['warn ECONNRESET', 'warn http 500', 'info works again (after 3 failed tries)'],
    },
    {
      steps: ['silent', 'working', 'silent'],
      lines: ['warn silent', 'info works again (after 1 failed try)', 'warn silent'],
    },
  ])('$steps', ({ steps, lines }) => {
    const got: string[] = [];
    const log: WatchLogger = {
      warn: (o, msg) => got.push(`warn ${(o as { kind: string }).kind}: ${msg}`),
      info: (_o, msg) => got.push(`info ${msg}`),
    };
    const h = new WatchHealth({ resource: 'pods', log, retryMs: 2000 });
    for (const s of steps) {
      if (s === 'working') h.working();
      else h.failed(failure(s));
    }
    expect(got.map((l) => l.replace(/^(warn [^:]+): .*$/, '$1').replace('watching pods ', ''))).toEqual(
      lines,
    );
    for (const l of got.filter((x) => x.startsWith('warn')))
      expect(l).toMatch(/failed: .* happened; llmgw lists and watches again every 2 s until it works$/);
  });
});
