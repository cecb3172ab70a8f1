import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { probeDaemon } from './container-daemon.js';
import type { ContainerRun } from './shards/container/types.js';
import { EngineRunners, type EngineRunnersOptions } from './engine-runners.js';
import { Supervisor } from './shards/process/process-supervisor.js';
import type { ShardRun, ShardRunner, ShardStatus } from './shards/types.js';
import { until } from '../../test/support/timing.js';

// The composite over a real process supervisor (a real child process) and a container
// runner double that keeps what it is told, to check which runs, statuses, logs and stops
// go where.

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((f) => f()));
});

const container: ContainerRun = {
  image: 'vllm/vllm-openai:v0.21.0',
  pull: 'missing',
  gpus: [],
  gpuRequest: 'nvidia',
  mounts: [],
  network: 'bridge',
  publish: { hostIp: '127.0.0.1', port: 1 },
  ipc: 'host',
  labels: {},
};

function run(key: string, c?: Partial<ContainerRun>): ShardRun {
  const [replica = key] = key.split('/');
  return {
    key,
    replica,
    rank: 0,
    processes: [
      { name: 'sleep', bin: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'], env: {} },
    ],
    ...(c === undefined ? {} : { container: { ...container, ...c } }),
    stopGraceMs: 2000,
  };
}

/** Keeps what it is told; its shards pull their image. */
class RecordingRunner implements ShardRunner {
  applied: ShardRun[][] = [];
  calls: string[] = [];
  readonly listeners = new Map<string, (line: string) => void>();
  apply(desired: readonly ShardRun[]): void {
    this.applied.push([...desired]);
  }
  statuses(): ShardStatus[] {
    return (this.applied.at(-1) ?? []).map((r) => ({
      key: r.key,
      replica: r.replica,
      rank: r.rank,
      state: 'downloading',
      reason: `pulling ${r.container?.image ?? ''}`,
      download: { done: 10, total: 100, rate_bps: 5 },
      restarts: 0,
    }));
  }
  logs(key: string): string[] {
    return [`container log of ${key}`];
  }
  follow(key: string, listener: (line: string) => void): () => void {
    this.listeners.set(key, listener);
    return () => this.listeners.delete(key);
  }
  stopped(): Promise<void> {
    this.calls.push('stopped');
    return Promise.resolve();
  }
  stopAll(): Promise<void> {
    this.calls.push('stopAll');
    return Promise.resolve();
  }
  detach(): Promise<void> {
    this.calls.push('detach');
    return Promise.resolve();
  }
}

function runners(o: Partial<EngineRunnersOptions> = {}): { engines: EngineRunners; changes: number[] } {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-runners-'));
  const supervisor = new Supervisor({ logDir: join(dir, 'logs'), onStatus: () => undefined, settleMs: 50 });
  const changes: number[] = [];
  const engines = new EngineRunners({ supervisor, onChange: () => changes.push(Date.now()), ...o });
  cleanup.push(() => engines.stopAll());
  return { engines, changes };
}

describe('engine runners: processes and containers behind one surface', () => {
  it('hands container runs to the container runner, the rest to the process supervisor, and merges statuses', async () => {
    const runner = new RecordingRunner();
    const { engines } = runners({ containers: () => Promise.resolve(runner) });
    engines.apply([run('p-1/0'), run('c-1/0', {})]);
    await until('the container runner', () => runner.applied.at(-1));
    expect(runner.applied.at(-1)?.map((r) => r.key)).toEqual(['c-1/0']);
    const statuses = await until('the process to start', () => {
      const s = engines.statuses();
      return s.find((x) => x.key === 'p-1/0')?.pid === undefined ? undefined : s;
    });
    expect(statuses.map((s) => s.key)).toEqual(['p-1/0', 'c-1/0']);
    expect(statuses[1]?.state).toBe('downloading');
    expect(statuses[1]?.download).toEqual({ done: 10, total: 100, rate_bps: 5 });
  });

  it('makes the container runner with no run wanted when asked (a node that ran containers), applying none', async () => {
    const runner = new RecordingRunner();
    let made = 0;
    const { engines } = runners({
      containers: () => {
        made++;
        return Promise.resolve(runner);
      },
    });
    engines.apply([run('p-1/0')]);
    await new Promise((r) => setTimeout(r, 50));
    expect(made).toBe(0);
    engines.connectContainers();
    await until('the container runner', () => engines.containers);
    expect(runner.applied).toEqual([[]]);
    engines.connectContainers();
    expect(made).toBe(1);
  });

  it('reads and follows each log where its shard runs', async () => {
    const runner = new RecordingRunner();
    const { engines } = runners({ containers: () => Promise.resolve(runner) });
    engines.apply([run('p-1/0'), run('c-1/0', {})]);
    await until('the container runner', () => runner.applied.at(-1));
    expect(engines.logs('c-1/0')).toEqual(['container log of c-1/0']);
    expect(engines.logs('p-1/0')).not.toContain('container log of p-1/0');
    const lines: string[] = [];
    const stop = engines.follow('c-1/0', (l) => lines.push(l));
    runner.listeners.get('c-1/0')?.('pulled');
    stop();
    expect(lines).toEqual(['pulled']);
    expect(runner.listeners.has('c-1/0')).toBe(false);
    engines.follow('p-1/0', () => undefined)();
    expect(runner.listeners.has('p-1/0')).toBe(false);
  });

  it('builds the runs again once the daemon answered, rather than applying the ones held', async () => {
    const runner = new RecordingRunner();
    const late: { engines?: EngineRunners } = {};
    const made = runners({
      containers: () => Promise.resolve(runner),
      onContainers: () => late.engines?.apply([run('c-1/0', { gpuRequest: 'cdi' })]),
    });
    const engines = (late.engines = made.engines);
    engines.apply([run('c-1/0', {})]);
    await until('the container runner', () => runner.applied.at(-1));
    expect(runner.applied.map((a) => a.map((r) => r.container?.gpuRequest))).toEqual([['cdi']]);
  });

  it('fails a container shard with why when no daemon answers, and asks again later', async () => {
    const runner = new RecordingRunner();
    let calls = 0;
    const { engines } = runners({
      retryMs: 50,
      // The agent's own first step: a socket where nothing listens, then one that answers.
      containers: async () => {
        calls++;
        if (calls === 1) await probeDaemon({ runtime: 'auto', host: 'unix:///nonexistent/d.sock' }, {});
        return runner;
      },
    });
    engines.apply([run('c-1/0', {})]);
    expect(engines.statuses()).toMatchObject([
      { key: 'c-1/0', state: 'starting', reason: 'connecting to the container daemon' },
    ]);
    const failed = await until('the failure', () => engines.statuses().find((s) => s.state === 'failed'));
    expect(failed.reason).toBe(
      'no usable container daemon at unix:///nonexistent/d.sock (agent.containers.host: connect ENOENT /nonexistent/d.sock): start Docker or Podman (its API socket: systemctl start docker, or systemctl start podman.socket), or set agent.containers.host (or DOCKER_HOST) to where it listens',
    );
    expect(engines.logs('c-1/0')).toEqual([]);
    await until('the second try', () => runner.applied.at(-1));
    expect(engines.statuses()[0]?.state).toBe('downloading');
  });

  it('fails a container shard on an agent made without a container supervisor', () => {
    const { engines, changes } = runners();
    engines.apply([run('c-1/0', {})]);
    expect(changes.length).toBeGreaterThan(0);
    expect(engines.statuses()).toEqual([
      {
        key: 'c-1/0',
        replica: 'c-1',
        rank: 0,
        state: 'failed',
        reason:
          'the profile has runtime: container, but this agent runs engines as processes only (it was started without a container supervisor): upgrade the agent, or use runtime: process',
        restarts: 0,
      },
    ]);
  });

  it("leaves a container shard's published port out of the ports other programs hold", async () => {
    const server: Server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => server.close(() => r())));
    const port = (server.address() as { port: number }).port;
    const { engines } = runners({ containers: () => Promise.resolve(new RecordingRunner()) });
    expect(engines.portsTaken(port, port)).toEqual([port]);
    engines.apply([run('c-1/0', { publish: { hostIp: '127.0.0.1', port } })]);
    expect(engines.portsTaken(port, port)).toEqual([]);
  });

  it("releases an earlier agent's process for a shard that now runs as a container", () => {
    const released: string[] = [];
    const supervisor = {
      unclaimed: () => ['p-1/0', 'c-1/0'],
      releaseUnclaimed: (keep: (key: string) => boolean = () => false) => {
        const out = ['p-1/0', 'c-1/0'].filter((k) => !keep(k));
        released.push(...out);
        return out;
      },
      apply: () => undefined,
      statuses: () => [],
      logs: () => [],
      follow: () => () => undefined,
      portsTaken: () => [],
      stopped: () => Promise.resolve(),
      stopAll: () => Promise.resolve(),
      detach: () => Promise.resolve(),
    };
    const engines = new EngineRunners({
      supervisor,
      containers: () => Promise.resolve(new RecordingRunner()),
      onChange: () => undefined,
    });
    engines.apply([run('p-1/0'), run('c-1/0', {})]);
    expect(engines.releaseUnclaimed(() => true)).toEqual(['c-1/0']);
    expect(released).toEqual(['c-1/0']);
  });

  it('stops and detaches both', async () => {
    const runner = new RecordingRunner();
    const { engines } = runners({ containers: () => Promise.resolve(runner) });
    engines.apply([run('c-1/0', {})]);
    await until('the container runner', () => runner.applied.at(-1));
    await engines.stopped();
    await engines.detach();
    await engines.stopAll();
    expect(runner.calls).toEqual(['stopped', 'detach', 'stopAll']);
  });
});
