import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { daemonAddresses, gpuRequestFor } from '../agent/container-daemon.js';
import { containersLine, diagnose, type DoctorInput } from '../agent/doctor.js';
import { validateModels } from '../catalog/validate.js';
import { engines } from '../engines/registry.js';
import { settingsSchema } from '../config/schema.js';

import { containersWantedBy, probeContainers } from './run-doctor.js';

// `llmgw doctor`'s container check, against a daemon of our own on a unix socket that
// answers as Docker or Podman do (GET /_ping, /version, /info).

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

interface Fake {
  podman?: boolean;
  runtimes?: string[];
  cdiDirs?: string[] | null;
  version?: string;
}

async function daemon(f: Fake): Promise<string> {
  const path = join(mkdtempSync(join(tmpdir(), 'llmgw-daemon-')), 'd.sock');
  const server = createServer((req, res) => {
    if (req.url === '/_ping') {
      res.writeHead(200, {
        'Api-Version': '1.41',
        ...(f.podman === true ? { 'Libpod-Api-Version': '5.4.0' } : {}),
      });
      res.end('OK');
    } else if (req.url === '/version') {
      res.end(
        JSON.stringify({
          Version: f.version ?? '20.10.24+dfsg1',
          ApiVersion: '1.41',
          Components: [{ Name: f.podman === true ? 'Podman Engine' : 'Engine' }],
        }),
      );
    } else if (req.url === '/info') {
      res.end(
        JSON.stringify({
          Runtimes: Object.fromEntries((f.runtimes ?? ['runc']).map((r) => [r, { path: r }])),
          CDISpecDirs: f.cdiDirs ?? null,
        }),
      );
    } else {
      res.writeHead(404);
      res.end('{}');
    }
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(path, r));
  return `unix://${path}`;
}

function settings(containers: Record<string, unknown>, models: unknown[] = []) {
  const { models: valid, issues } = validateModels(models, engines);
  if (issues.length > 0) throw new Error(JSON.stringify(issues));
  return { ...settingsSchema.parse({ agent: { containers } }), models: valid };
}

const gpuHost = {
  hostname: 'n',
  os: 'linux',
  arch: 'x64',
  cpus: { count: 1, model: 'x' },
} as DoctorInput['host'];
const a100Path = {
  method: 'nvml' as const,
  ok: true,
  cards: [
    {
      index: 0,
      uuid: 'GPU-0',
      name: 'NVIDIA A100-SXM4-80GB',
      class: 'a100-80g',
      pci_bus_id: '0',
      memory_total_mib: 81920,
      memory_used_mib: 0,
      wear: {},
      processes: [],
      instances: [],
    },
  ],
};

async function doctor(s: ReturnType<typeof settings>, gpu = true) {
  const containers = await probeContainers(s, {});
  const report = diagnose({
    paths: gpu ? [a100Path] : [],
    engines: [{ name: 'llama-server', found: false, installs: true }],
    host: gpuHost,
    ...(containers === undefined ? {} : { containers }),
  });
  return { containers, report, messages: report.warnings.map((w) => w.message) };
}

describe('llmgw doctor: the container daemon', () => {
  it('is not asked, and not shown, where nothing uses containers', async () => {
    const { containers, report } = await doctor(settings({}));
    expect(containers).toBeUndefined();
    expect(report).not.toHaveProperty('containers');
  });

  it('says what uses containers: a declared profile, or a setting', () => {
    const model = {
      name: 'm',
      source: '/m',
      profiles: [{ name: 'p', engine: 'vllm', gpu_class: 'l4-24g', runtime: 'container' }],
    };
    expect(containersWantedBy(settings({}, [model]))).toBe('model m profile p has runtime: container');
    expect(containersWantedBy(settings({ registry: 'm.local' }))).toBe('agent.containers.registry is set');
    expect(containersWantedBy(settings({ images: { vllm: 'a/b:1' } }))).toBe(
      'agent.containers.images.vllm is set',
    );
    // A profile added through the API is not in the file: the agent's mark in the data dir says it.
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-doctor-used-'));
    expect(containersWantedBy({ ...settings({}), data_dir: dataDir })).toBeUndefined();
    writeFileSync(join(dataDir, 'containers-used'), '');
    expect(containersWantedBy({ ...settings({}), data_dir: dataDir })).toBe(
      'this node has run engines in containers',
    );
    rmSync(dataDir, { recursive: true });
  });

  it('Docker with the nvidia runtime: its kind, version and runtimes, and no warning', async () => {
    const host = await daemon({ runtimes: ['runc', 'nvidia'] });
    const { containers, messages } = await doctor(settings({ host }));
    expect(messages).toEqual([]);
    expect(containersLine(containers ?? { wanted_by: '', answers: false })).toBe(
      `docker 20.10.24+dfsg1 (API 1.41) at ${host}; runtimes: nvidia, runc; CDI: no; GPUs by the nvidia runtime`,
    );
  });

  it('Docker without the nvidia runtime or CDI, on a GPU node: says how GPU containers fail and what to install', async () => {
    const host = await daemon({});
    const { report, messages } = await doctor(settings({ host }));
    expect(messages).toEqual([
      `Docker at ${host} lists no nvidia runtime, so GPU containers fail there (the daemon says: could not select device driver "nvidia"): install the NVIDIA Container Toolkit, run nvidia-ctk runtime configure --runtime=docker and restart the daemon`,
    ]);
    expect(report.exit_code).toBe(1);
  });

  it('the same daemon on a CPU node: nothing to say', async () => {
    const host = await daemon({});
    const { messages } = await doctor(settings({ host }), false);
    expect(messages).toEqual([]);
  });

  it('Podman: CDI names, and a warning where gpus: cdi meets a Docker without CDI', async () => {
    const podman = await daemon({ podman: true, version: '5.4.0' });
    const p = await doctor(settings({ host: podman }));
    expect(p.messages).toEqual([]);
    expect(p.containers).toMatchObject({ kind: 'podman', cdi: true, gpu_request: 'cdi' });
    // The libpod API the agent speaks, not the Docker-compatible one /version names.
    expect(containersLine(p.containers ?? { wanted_by: '', answers: false })).toMatch(
      new RegExp(
        `^podman 5\\.4\\.0 \\(libpod API 5\\.4\\.0\\) at ${podman}; .*; CDI: yes; GPUs by CDI name$`,
      ),
    );
    const docker = await daemon({ runtimes: ['runc', 'nvidia'] });
    const d = await doctor(settings({ host: docker, gpus: 'cdi' }));
    expect(d.messages).toEqual([
      `Docker at ${docker} resolves no CDI devices, so it cannot give containers this node's GPUs by CDI name: generate NVIDIA's CDI spec (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml) and enable CDI in the daemon, or set agent.containers.gpus: nvidia`,
    ]);
  });

  it('runtime: podman meeting Docker: says which it is and what to set', async () => {
    const host = await daemon({});
    const { messages } = await doctor(settings({ host, runtime: 'podman' }));
    expect(messages).toEqual([
      `agent.containers.host is set, but no usable container daemon at ${host} (agent.containers.host: it is Docker, but agent.containers.runtime is podman: set it to docker or auto, or point agent.containers.host at the podman socket): start Docker or Podman (its API socket: systemctl start docker, or systemctl start podman.socket), or set agent.containers.host (or DOCKER_HOST) to where it listens`,
    ]);
  });

  it('no daemon: names the socket tried and the setting, and the node cannot serve', async () => {
    const host = `unix://${join(mkdtempSync(join(tmpdir(), 'llmgw-daemon-')), 'none.sock')}`;
    const { containers, report, messages } = await doctor(settings({ host }));
    expect(messages).toEqual([
      `agent.containers.host is set, but no usable container daemon at ${host} (agent.containers.host: connect ENOENT ${host.slice('unix://'.length)}): start Docker or Podman (its API socket: systemctl start docker, or systemctl start podman.socket), or set agent.containers.host (or DOCKER_HOST) to where it listens`,
    ]);
    expect(report.exit_code).toBe(1);
    expect(containersLine(containers ?? { wanted_by: '', answers: false })).toBe(
      'no daemon answers (agent.containers.host is set)',
    );
  });

  it('tries the setting, else DOCKER_HOST, else the usual sockets', () => {
    const c = settingsSchema.parse({}).agent.containers;
    expect(daemonAddresses({ ...c, host: 'tcp://10.0.0.5:2375' }, { DOCKER_HOST: 'unix:///x' })).toEqual([
      { url: 'tcp://10.0.0.5:2375', from: 'agent.containers.host' },
    ]);
    expect(daemonAddresses(c, { DOCKER_HOST: 'unix:///x' })).toEqual([
      { url: 'unix:///x', from: 'DOCKER_HOST' },
    ]);
    expect(daemonAddresses(c, { XDG_RUNTIME_DIR: '/run/user/1000' }).map((a) => a.url)).toEqual([
      'unix:///var/run/docker.sock',
      'unix:///run/podman/podman.sock',
      'unix:///run/user/1000/podman/podman.sock',
    ]);
    expect(daemonAddresses({ ...c, runtime: 'podman' }, {}).map((a) => a.url)).toEqual([
      'unix:///run/podman/podman.sock',
    ]);
  });

  it.each([
    ['auto', 'docker', false, ['runc'], 'nvidia'],
    ['auto', 'docker', true, ['runc'], 'cdi'],
    ['auto', 'docker', true, ['nvidia', 'runc'], 'nvidia'],
    ['auto', 'podman', true, [], 'cdi'],
    ['nvidia', 'podman', true, [], 'nvidia'],
    ['cdi', 'docker', false, ['nvidia'], 'cdi'],
  ] as const)(
    'gpus: %s on %s (CDI %s, runtimes %j) hands GPUs by %s',
    (setting, kind, cdi, runtimes, want) => {
      expect(gpuRequestFor(setting, { kind, cdi, runtimes: [...runtimes] })).toBe(want);
    },
  );

  it.skipIf(!existsSync('/var/run/docker.sock'))('reads the real Docker daemon of this machine', async () => {
    const c = await probeContainers(settings({ runtime: 'docker' }), {});
    expect(c).toMatchObject({ answers: true, kind: 'docker', address: 'unix:///var/run/docker.sock' });
    expect(c?.runtimes).toContain('runc');
  });
});
