#!/usr/bin/env node
// Summarises a V8 CPU profile (node --cpu-prof) of the llmgw process: the functions with
// the most self time, and the same grouped by file, with paths shortened to the repository.
//
//   node bench/gateway-profile.mjs FILE.cpuprofile [TOP]
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Self time per profile node, in ms, from the samples and the gaps between them. */
export function summarise(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const { samples = [], timeDeltas = [] } = profile;
  for (let i = 0; i < samples.length; i++) {
    // timeDeltas[i] is the time before sample i; it is charged to the sample after it.
    const dt = (timeDeltas[i + 1] ?? 0) / 1000;
    self.set(samples[i], (self.get(samples[i]) ?? 0) + dt);
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fns = new Map();
  const files = new Map();
  for (const [id, ms] of self) {
    const cf = byId.get(id)?.callFrame;
    if (cf === undefined) continue;
    const file = shortUrl(cf.url);
    const where = file === '' ? '' : `${file}:${cf.lineNumber + 1}`;
    const name = `${cf.functionName || '(anonymous)'}${where === '' ? '' : ` ${where}`}`;
    fns.set(name, (fns.get(name) ?? 0) + ms);
    const group = file === '' ? cf.functionName || '(native)' : file;
    files.set(group, (files.get(group) ?? 0) + ms);
  }
  const sorted = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  // Time the process waited for work: left out of the shares, which are of the busy time.
  const busy = total - (files.get('(idle)') ?? 0);
  return {
    totalMs: total,
    busyMs: busy,
    functions: sorted(fns).filter(([n]) => n !== '(idle)'),
    files: sorted(files).filter(([n]) => n !== '(idle)'),
  };
}

function shortUrl(url) {
  if (url === '') return '';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  return path.startsWith(root) ? path.slice(root.length) : path;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (file === undefined) {
    process.stderr.write('usage: node bench/gateway-profile.mjs FILE.cpuprofile [TOP]\n');
    process.exit(2);
  }
  const top = Number(process.argv[3] ?? 30);
  const s = summarise(JSON.parse(readFileSync(file, 'utf8')));
  const pct = (ms) => `${((ms / s.busyMs) * 100).toFixed(1).padStart(5)}%`;
  console.log(
    `${file}: ${(s.totalMs / 1000).toFixed(1)} s sampled, ${(s.busyMs / 1000).toFixed(1)} s busy (shares are of the busy time)`,
  );
  console.log('\nself time by function:');
  for (const [name, ms] of s.functions.slice(0, top))
    console.log(`${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${name}`);
  console.log('\nself time by file:');
  for (const [name, ms] of s.files.slice(0, top))
    console.log(`${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${name}`);
}
