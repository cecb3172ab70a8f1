import type { LoadMetrics } from '../../engines/types.js';

/** A replica's load as its engine reports it. */
export interface ParsedLoad {
  running: number;
  waiting: number;
  kvUsage?: number;
}

const HASH = 0x23;
const SPACE = 0x20;
const TAB = 0x09;
const CR = 0x0d;
const LF = 0x0a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Reads the engine's load from a Prometheus text exposition
 * (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format).
 * Running and waiting are summed over their label sets (vLLM reports one per engine of a
 * data-parallel server); KV use is their mean, since each sample is a fraction of its own
 * engine's cache. NaN samples are skipped. Undefined when the running or the waiting
 * metric is absent: llama.cpp without `--metrics`, or a body that is not Prometheus text.
 *
 * It runs four times a second per replica, so it scans lines by index and only slices the
 * value of the few lines it wants.
 */
export function parseLoad(text: string, names: LoadMetrics): ParsedLoad | undefined {
  const { running: runningName, waiting: waitingName, kvUsage: kvName } = names;
  let running = 0;
  let waiting = 0;
  let kvSum = 0;
  let kvSamples = 0;
  let sawRunning = false;
  let sawWaiting = false;
  let sawKv = false;
  const length = text.length;
  let pos = 0;
  while (pos < length) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = length;
    let start = pos;
    pos = end + 1;
    while (start < end && isBlank(text.charCodeAt(start))) start++;
    if (start === end || text.charCodeAt(start) === HASH) continue;

    let which: 0 | 1 | 2 | 3 = 0;
    let nameEnd = 0;
    if (isName(text, start, end, runningName)) {
      which = 1;
      nameEnd = start + runningName.length;
    } else if (isName(text, start, end, waitingName)) {
      which = 2;
      nameEnd = start + waitingName.length;
    } else if (kvName !== undefined && isName(text, start, end, kvName)) {
      which = 3;
      nameEnd = start + kvName.length;
    } else {
      continue;
    }
    if (which === 1) sawRunning = true;
    else if (which === 2) sawWaiting = true;
    else sawKv = true;

    const value = sampleValue(text, nameEnd, end);
    if (Number.isNaN(value)) continue;
    if (which === 1) running += value;
    else if (which === 2) waiting += value;
    else {
      kvSum += value;
      kvSamples++;
    }
  }
  if (!sawRunning || !sawWaiting) return undefined;
  const load: ParsedLoad = { running, waiting };
  if (sawKv && kvSamples > 0) load.kvUsage = kvSum / kvSamples;
  return load;
}

function isBlank(c: number): boolean {
  return c === SPACE || c === TAB || c === CR;
}

/** Whether the line at `start` is a sample of exactly `name` (not of `name_total`). */
function isName(text: string, start: number, end: number, name: string): boolean {
  const after = start + name.length;
  if (after >= end || !text.startsWith(name, start)) return false;
  const c = text.charCodeAt(after);
  return c === OPEN_BRACE || c === SPACE || c === TAB;
}

/** The value after the name and its labels, NaN when the line is malformed. */
function sampleValue(text: string, from: number, end: number): number {
  let i = from;
  if (text.charCodeAt(i) === OPEN_BRACE) {
    // Label values may hold `}` and escaped quotes: only a brace outside quotes closes.
    let quoted = false;
    for (i++; i < end; i++) {
      const c = text.charCodeAt(i);
      if (quoted) {
        if (c === BACKSLASH) i++;
        else if (c === QUOTE) quoted = false;
      } else if (c === QUOTE) quoted = true;
      else if (c === CLOSE_BRACE) break;
    }
    if (i >= end) return NaN;
    i++;
  }
  while (i < end && isBlank(text.charCodeAt(i))) i++;
  let stop = i;
  while (stop < end) {
    const c = text.charCodeAt(stop);
    if (c === SPACE || c === TAB || c === CR || c === LF) break;
    stop++;
  }
  if (stop === i) return NaN;
  return parseNumber(text.slice(i, stop));
}

/** Go's float syntax as Prometheus writes it: `3`, `3.0`, `1e-3`, `NaN`, `+Inf`, `-Inf`. */
function parseNumber(token: string): number {
  const n = Number(token);
  if (!Number.isNaN(n)) return n;
  switch (token) {
    case '+Inf':
    case 'Inf':
      return Infinity;
    case '-Inf':
      return -Infinity;
    default:
      return NaN;
  }
}
