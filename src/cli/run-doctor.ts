import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

import { containersUsedFile, gpuRequestFor, probeDaemon } from '../agent/container-daemon.js';
import {
  containersLine,
  diagnose,
  engineLine,
  llamaServerProbe,
  type ContainerDaemonProbe,
  type ControlPlaneProbe,
  type DoctorReport,
  type EngineProbe,
  type PathResult,
} from '../agent/doctor.js';
import { hostInfo } from '../agent/host.js';
import { chooseFlavour, installedBuild } from '../agent/installer/index.js';
import { which, isExecutable } from '../agent/which.js';
import { ApiClient } from '../client/api-client.js';
import type { Settings } from '../config/load.js';
import { messageOf } from '../core/errors.js';
import { engines as registry } from '../engines/registry.js';
import { defaultDiscoveries } from '../gpu/discover.js';
import { DiscoveryError, type Card, type GpuDiscovery, type HostInfo } from '../gpu/types.js';

import type { Output } from './output.js';
import { commandSettings } from './settings.js';

const run = promisify(execFile);

export interface DoctorOptions {
  o: Output;
  server: string | undefined;
  token: string | undefined;
  config: string | undefined;
}

/** Probes this node and prints what is wrong; resolves with the exit status. */
export async function runDoctor(options: DoctorOptions): Promise<number> {
  const settings = commandSettings({ path: options.config, env: process.env }).settings;
  const { nvml, nvidiaSmi } = defaultDiscoveries(process.env);
  const paths = [await probePath(nvml), await probePath(nvidiaSmi)];
  const engines = await probeEngines(
    settings.agent.engines.llamacpp,
    settings.data_dir,
    paths.find((p) => p.ok)?.cards ?? [],
  );
  const controlPlane =
    options.server === undefined ? undefined : await probeControlPlane(options.server, options.token);
  const containers = await probeContainers(settings);
  const report = diagnose({
    paths,
    engines,
    host: hostOf(settings.data_dir),
    ...(controlPlane === undefined ? {} : { controlPlane }),
    ...(containers === undefined ? {} : { containers }),
  });
  if (options.o.json) options.o.out(JSON.stringify(report, null, 2));
  else options.o.out(human(report));
  return report.exit_code;
}

/**
 * The host, with the free disk of the file system the data dir is (or would be) on. The
 * doctor only looks: it measures at the nearest directory that exists and creates none.
 */
function hostOf(dataDir: string): HostInfo {
  let dir = dataDir;
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const host = hostInfo(dir);
  return { ...host, disk: { ...host.disk, path: dataDir } };
}

async function probePath(d: GpuDiscovery): Promise<PathResult> {
  try {
    const found = await d.discover();
    return {
      method: d.method,
      ok: true,
      cards: found.cards,
      ...(found.driver_version === undefined ? {} : { driver_version: found.driver_version }),
      ...(found.cuda_version === undefined ? {} : { cuda_version: found.cuda_version }),
    };
  } catch (e) {
    return {
      method: d.method,
      ok: false,
      kind: e instanceof DiscoveryError ? e.kind : 'unusable',
      reason: messageOf(e),
    };
  }
}

/**
 * What in this node's settings runs engines as containers: a declared model's profile with
 * runtime: container, or an agent.containers key set. Undefined: nothing does, and the
 * daemon is not asked.
 */
export function containersWantedBy(
  settings: Pick<Settings, 'agent' | 'models'> & Partial<Pick<Settings, 'data_dir'>>,
): string | undefined {
  for (const m of settings.models)
    for (const p of m.profiles)
      if (p.runtime === 'container') return `model ${m.name} profile ${p.name} has runtime: container`;
  const c = settings.agent.containers;
  if (c.host !== '') return 'agent.containers.host is set';
  if (c.runtime !== 'auto') return `agent.containers.runtime is ${c.runtime}`;
  if (c.registry !== '') return 'agent.containers.registry is set';
  const image = Object.keys(c.images)[0];
  if (image !== undefined) return `agent.containers.images.${image} is set`;
  // Profiles added through the API are not in the file: the agent marks a node that ran containers.
  if (settings.data_dir !== undefined && existsSync(join(settings.data_dir, containersUsedFile)))
    return 'this node has run engines in containers';
  return undefined;
}

/** The container daemon, where something here uses containers. */
export async function probeContainers(
  settings: Pick<Settings, 'agent' | 'models'> & Partial<Pick<Settings, 'data_dir'>>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ContainerDaemonProbe | undefined> {
  const wanted = containersWantedBy(settings);
  if (wanted === undefined) return undefined;
  const c = settings.agent.containers;
  try {
    const d = await probeDaemon(c, env);
    return {
      wanted_by: wanted,
      answers: true,
      address: d.address.url,
      kind: d.kind,
      version: d.version,
      api_version: d.apiVersion,
      runtimes: d.runtimes,
      cdi: d.cdi,
      gpu_request: gpuRequestFor(c.gpus, d),
    };
  } catch (e) {
    return { wanted_by: wanted, answers: false, error: messageOf(e) };
  }
}

async function probeEngines(
  llama: Settings['agent']['engines']['llamacpp'],
  dataDir: string,
  cards: readonly Card[],
): Promise<EngineProbe[]> {
  // The build the agent would install here: its flavour as the agent chooses it.
  const mig = cards.some((c) => c.mig?.current === true);
  const { flavour } = chooseFlavour(cards.length > 0, mig, llama.cuda_archive, process.arch);
  const out: EngineProbe[] = [
    llamaServerProbe({
      bin: llama.bin,
      binRuns: llama.bin !== undefined && isExecutable(llama.bin),
      installed: installedBuild(dataDir, llama.build, flavour),
      onPath: which('llama-server'),
      platform: process.platform,
      arch: process.arch,
      key: `${llama.build}-${flavour}`,
    }),
  ];
  // Executables on PATH first, then Python modules, each engine as it says it is found.
  for (const { onNode } of registry) {
    if (onNode === undefined || !('bin' in onNode)) continue;
    const path = which(onNode.bin);
    out.push(
      path === undefined
        ? { name: onNode.bin, found: false, detail: 'not on PATH' }
        : { name: onNode.bin, found: true, path },
    );
  }
  for (const { onNode } of registry)
    if (onNode !== undefined && 'pythonModule' in onNode) out.push(await probePython(onNode));
  return out;
}

/** An engine run as a Python module (SGLang): whether python3 on PATH can import it. */
async function probePython(o: { pythonModule: string; launch: string }): Promise<EngineProbe> {
  const name = o.pythonModule;
  const python = which('python3');
  if (python === undefined) return { name, found: false, detail: 'no python3 on PATH' };
  try {
    await run(
      python,
      [
        '-c',
        `import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(${JSON.stringify(name)}) else 1)`,
      ],
      { timeout: 10_000 },
    );
    return { name, found: true, path: python, detail: o.launch };
  } catch {
    return { name, found: false, detail: `not installed for ${python}` };
  }
}

async function probeControlPlane(server: string, token: string | undefined): Promise<ControlPlaneProbe> {
  const client = new ApiClient({ server, timeoutMs: 10_000 });
  try {
    const health = await client.health();
    const probe: ControlPlaneProbe = { url: server, reachable: true, version: health.version };
    if (token !== undefined) {
      try {
        const t = await client.checkJoinToken(token);
        probe.token = { accepted: true, name: t.name, expires_at: t.expires_at };
      } catch (e) {
        probe.token = { accepted: false, error: messageOf(e) };
      }
    }
    return probe;
  } catch (e) {
    return { url: server, reachable: false, error: messageOf(e) };
  }
}

function human(r: DoctorReport): string {
  const lines: string[] = [];
  lines.push(
    `Discovery:      ${r.discovery.method === 'none' ? 'none (a CPU-only node)' : r.discovery.method}`,
  );
  for (const reason of r.discovery.reasons) lines.push(`                not ${reason}`);
  if (r.driver_version !== undefined)
    lines.push(
      `Driver:         ${r.driver_version}${r.cuda_version === undefined ? '' : `, CUDA ${r.cuda_version}`}`,
    );
  lines.push(
    `Host:           ${r.host.hostname}: ${r.host.cpus.count} CPUs, ${Math.round(r.host.memory.total_mib / 1024)} GiB RAM, ${Math.round(r.host.disk.free_mib / 1024)} GiB free under ${r.host.disk.path}`,
  );
  if (r.cards.length > 0) {
    lines.push('Cards:');
    for (const c of r.cards) {
      lines.push(
        `  ${c.index}  ${c.name}  ${c.class}  ${c.mode === 'mig' ? `MIG, ${c.instances.length} instance${c.instances.length === 1 ? '' : 's'}` : 'whole'}  ${c.memory_used_mib}/${c.memory_total_mib} MiB`,
      );
      for (const i of c.instances)
        lines.push(
          `     ${i.label}  ${i.profile}  ${i.class}  ${i.memory_used_mib}/${i.memory_total_mib} MiB  ${i.uuid}`,
        );
    }
  }
  lines.push('Engines:');
  for (const e of r.engines) lines.push(engineLine(e));
  if (r.containers !== undefined) lines.push(`Containers:     ${containersLine(r.containers)}`);
  if (r.control_plane !== undefined) {
    const cp = r.control_plane;
    lines.push(
      `Control plane:  ${cp.url}: ${cp.reachable ? `answers (llmgw ${cp.version ?? '?'})` : `does not answer (${cp.error ?? ''})`}`,
    );
    if (cp.token !== undefined)
      lines.push(
        `Join token:     ${cp.token.accepted ? `accepted ("${cp.token.name ?? ''}", ${cp.token.expires_at === null || cp.token.expires_at === undefined ? 'never expires' : `expires ${cp.token.expires_at}`})` : `refused: ${cp.token.error ?? ''}`}`,
      );
  }
  if (r.warnings.length === 0) lines.push('', 'No problems found.');
  else {
    lines.push('', 'Warnings:');
    for (const w of r.warnings) lines.push(`  ${w.blocking ? '!' : '-'} ${w.code}: ${w.message}`);
    lines.push(
      '',
      r.exit_code === 1
        ? 'This node cannot serve until the warnings marked ! are fixed.'
        : 'Nothing here stops this node from serving.',
    );
  }
  return lines.join('\n');
}
