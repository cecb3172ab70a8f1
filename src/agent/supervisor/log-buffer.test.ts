import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { LineSplitter, LogBuffer } from './log-buffer.js';

describe('LineSplitter', () => {
  it('cuts chunks into lines, across chunk boundaries and multi-byte characters', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    const text = Buffer.from('first\r\nsecond – ünïcode\nthi');
    s.push(text.subarray(0, 15));
    s.push(text.subarray(15));
    s.push(Buffer.from('rd'));
    expect(lines).toEqual(['first', 'second – ünïcode']);
    s.flush();
    expect(lines).toEqual(['first', 'second – ünïcode', 'third']);
  });

  it('cuts a line that never ends', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    s.push(Buffer.from('x'.repeat(64 * 1024 + 10)));
    expect(lines.map((l) => l.length)).toEqual([64 * 1024]);
  });
});

describe('LogBuffer', () => {
  it('keeps the last lines, and tells those since a point', () => {
    const log = new LogBuffer({ lines: 3, maxFileBytes: 1 << 20 });
    for (const l of ['a', 'b']) log.push(l);
    const mark = log.total;
    for (const l of ['c', 'd', 'e']) log.push(l);
    expect(log.tail()).toEqual(['c', 'd', 'e']);
    expect(log.tail(2)).toEqual(['d', 'e']);
    expect(log.tail(10, mark)).toEqual(['c', 'd', 'e']);
    expect(log.tail(10, log.total - 1)).toEqual(['e']);
  });

  it('feeds followers until they leave, and survives one that throws', () => {
    const log = new LogBuffer({ lines: 10, maxFileBytes: 1 << 20 });
    const seen: string[] = [];
    log.follow(() => {
      throw new Error('socket closed');
    });
    const leave = log.follow((l) => seen.push(l));
    log.push('one');
    leave();
    log.push('two');
    expect(seen).toEqual(['one']);
  });

  it('appends to its file and rotates it, keeping one previous file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-log-'));
    const file = join(dir, 'r-r0.log');
    const log = new LogBuffer({ lines: 10, file, maxFileBytes: 100 });
    for (let i = 0; i < 30; i++) log.push(`line ${String(i).padStart(2, '0')} ......`);
    log.close();
    await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(`${file}.1`)).toBe(true);
    const current = readFileSync(file, 'utf8');
    const previous = readFileSync(`${file}.1`, 'utf8');
    expect(current.endsWith('line 29 ......\n')).toBe(true);
    expect(Buffer.byteLength(previous)).toBeGreaterThanOrEqual(100);
    expect(Buffer.byteLength(previous)).toBeLessThan(100 + 20);
    expect(existsSync(`${file}.2`)).toBe(false);
  });
});
