// Processes and the machine, as the gateway benchmark reads them: CPU time from /proc,
// free ports, children started and stopped by their own ids.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const clockTicks = 100; // USER_HZ on Linux

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Fields of /proc/PID/stat after the command name, whose parentheses may hold spaces. */
function statFields(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of one process, in seconds (its children not counted). */
export function cpuSeconds(pid) {
  try {
    const f = statFields(pid);
    return (Number(f[11]) + Number(f[12])) / clockTicks;
  } catch {
    return 0;
  }
}

/** The processes whose parent is `pid` (nginx's workers). */
export function childrenOf(pid) {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (Number(statFields(name)[1]) === pid) out.push(Number(name));
    } catch {
      // Gone between the listing and the read.
    }
  }
  return out;
}

/** CPU seconds of the machine: busy and all (from /proc/stat), to tell how loaded it was. */
export function machineCpu() {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const all = v.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = v[3] + v[4];
  return { busy: (all - idle) / clockTicks, all: all / clockTicks };
}

/** A port the OS says is free now (outside llmgw's engine range, which is lower). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * A child process whose output is kept (the last 64 KiB) and can be waited on; stopped by
 * its own pid only.
 */
export function start(cmd, args, options = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  let output = '';
  const keep = (d) => {
    output = (output + d.toString()).slice(-65536);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    child,
    pid: child.pid,
    output: () => output,
    exited,
    /** Signals it and waits for it to exit; SIGKILL after `graceMs`. */
    async stop(signal = 'SIGTERM', graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Polls `probe` until it gives something other than undefined, or throws naming `what`. */
export async function until(what, probe, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(
        `timed out waiting for ${what}${last === undefined ? '' : `: ${last.message ?? last}`}`,
      );
    await sleep(250);
  }
}
