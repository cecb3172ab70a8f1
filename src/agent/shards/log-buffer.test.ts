import { appendFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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

  it('reads back what engines append to its file, keeps notes out of memory, and rotates it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-log-'));
    const file = join(dir, 'r-r0.log');
    writeFileSync(file, 'an earlier run\n');
    const log = new LogBuffer({ lines: 10, file, maxFileBytes: 100 });
    // What was there is an earlier run's: not read.
    appendFileSync(file, 'line 00 ......\npart');
    log.note('started x (pid 1)');
    log.readNow();
    // The note goes on a line of its own, cutting the engine's unfinished one.
    expect(log.tail()).toEqual(['line 00 ......', 'part']);
    appendFileSync(file, 'ial\n');
    for (let i = 1; i < 30; i++) {
      appendFileSync(file, `line ${String(i).padStart(2, '0')} ......\n`);
      log.readNow();
    }
    expect(log.tail(3)).toEqual(['line 27 ......', 'line 28 ......', 'line 29 ......']);
    expect(log.tail()).not.toContain(expect.stringMatching(/^--- llmgw/));
    expect(existsSync(`${file}.1`)).toBe(true);
    expect(Buffer.byteLength(readFileSync(`${file}.1`, 'utf8'))).toBeGreaterThanOrEqual(100);
    expect(readFileSync(file, 'utf8').length).toBeLessThan(100);
    expect(existsSync(`${file}.2`)).toBe(false);
    // A last line without its newline counts once the writer is gone.
    appendFileSync(file, 'no newline');
    log.readNow();
    expect(log.tail(1)).toEqual(['line 29 ......']);
    log.readNow(true);
    expect(log.tail(1)).toEqual(['no newline']);
    log.close();
  });

  it("loads the last lines already written, for an adopted engine's log", () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-log-'));
    const file = join(dir, 'r-r0.log');
    writeFileSync(file, 'one\n--- llmgw 2026-01-01T00:00:00.000Z: started\ntwo\nthr');
    const log = new LogBuffer({ lines: 10, file, maxFileBytes: 1 << 20 });
    log.loadRecent();
    expect(log.tail()).toEqual(['one', 'two']);
    appendFileSync(file, 'ee\n');
    log.readNow();
    expect(log.tail()).toEqual(['one', 'two', 'three']);
  });
});
