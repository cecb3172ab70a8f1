import { mkdirSync, readFileSync, statfsSync } from 'node:fs';
import { arch, cpus, freemem, hostname, platform, release, totalmem } from 'node:os';

import type { HostInfo } from '../gpu/types.js';

const mib = 1024 * 1024;

/** This machine's CPUs, memory and the disk under the data dir. */
export function hostInfo(dataDir: string): HostInfo {
  const list = cpus();
  mkdirSync(dataDir, { recursive: true });
  const fs = statfsSync(dataDir);
  return {
    hostname: hostname(),
    os: `${platform()} ${release()}`,
    arch: arch(),
    cpus: { count: list.length, model: list[0]?.model.trim() ?? 'unknown' },
    memory: { total_mib: Math.round(totalmem() / mib), free_mib: Math.round(availableMemory() / mib) },
    disk: {
      path: dataDir,
      total_mib: Math.round((fs.blocks * fs.bsize) / mib),
      free_mib: Math.round((fs.bavail * fs.bsize) / mib),
    },
  };
}

/**
 * What a new process can still get. os.freemem() is MemFree, which leaves out the page
 * cache the kernel gives back on demand; MemAvailable counts it, where the kernel has it.
 */
function availableMemory(): number {
  try {
    const meminfo = readMeminfo();
    if (meminfo !== undefined) return meminfo;
  } catch {
    // Not Linux, or /proc unreadable: fall through.
  }
  return freemem();
}

function readMeminfo(): number | undefined {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return m?.[1] === undefined ? undefined : Number(m[1]) * 1024;
}
