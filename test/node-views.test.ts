import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { freePort } from './fakes/engines/fake-engines.js';
import { llmgw, startDaemon, type Daemon } from './support/cli.js';
import { buildFakeNvml, fakeNvidiaSmi, nvmlScenarioFile } from './support/fake-gpu.js';

const adminKey = 'node-views-admin-key-0123456789abcdef';

/**
 * The whole path with real processes: `llmgw server`, `llmgw agent` on a machine whose
 * nvidia-smi (or NVML library) is a fake built from real formats, and `llmgw ctl` and
 * `llmgw doctor` reading the result.
 */
describe('nodes seen through llmgw ctl and llmgw doctor', () => {
  let dir: string;
  let server: Daemon;
  let url: string;
  const agents: Daemon[] = [];
  let env: Record<string, string>;

  const ctl = (args: string[]) => llmgw(['ctl', ...args], env);
  const token = async (name: string) =>
    JSON.parse((await ctl(['node', 'token', '--name', name, '--json'])).stdout).secret as string;
  const startAgent = async (name: string, extra: Record<string, string>) => {
    const d = startDaemon(['agent', '--server', url, '--token', await token(`t-${name}`), '--name', name], {
      LLMGW_DATA_DIR: join(dir, name),
      ...extra,
    });
    agents.push(d);
    await d.waitFor(/joined the cluster/);
    return d;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-views-'));
    writeFileSync(join(dir, 'config.yaml'), 'listen: 127.0.0.1:0\nagent:\n  heartbeat_ms: 300\n');
    server = startDaemon(['server', '--config', join(dir, 'config.yaml')], {
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_DATA_DIR: dir,
    });
    url = (await server.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    env = { XDG_CONFIG_HOME: join(dir, 'xdg'), LLMGW_SERVER: url, LLMGW_KEY: adminKey };
    const noNvml = { LLMGW_NVML_LIBRARY: join(dir, 'no-such-libnvidia-ml.so.1') };
    await startAgent('h100-node', {
      ...noNvml,
      LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
      FAKE_NVIDIA_SMI_FIXTURE: 'h100-mig-590',
    });
    await startAgent('a100-node', {
      ...noNvml,
      LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
      FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550',
    });
    await startAgent('nvml-node', {
      LLMGW_NVML_LIBRARY: await buildFakeNvml(),
      FAKE_NVML_SCENARIO: nvmlScenarioFile('mig-none-carved'),
    });
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    expect(await server.stop()).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists nodes with state, last seen, devices by class, CPUs and RAM', async () => {
    const r = await ctl(['nodes']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+STATE\s+LAST SEEN\s+DEVICES\s+CPUS\s+RAM$/);
    expect(r.stdout).toMatch(/a100-node\s+Ready\s+\d+s\s+8×a100-80g\s+\d+\s+[\d.]+Gi/);
    expect(r.stdout).toMatch(
      /h100-node\s+Ready\s+\d+s\s+1×h100-80g-mig-3g\.40gb, 1×h100-80g-mig-2g\.20gb, 1×h100-80g-mig-1g\.10gb/,
    );
    expect(r.stdout).toMatch(/nvml-node\s+Ready\s+.*card(s)? left out/);
  });

  it('shows every device of a node as card or card/migN, and every card left out with its reason', async () => {
    const mig = await ctl(['node', 'show', 'h100-node']);
    expect(mig.stdout).toContain('Discovery:     nvidia-smi, driver 590.48.01, CUDA 13.1');
    expect(mig.stdout).toMatch(/\(nvml: \S+no-such-libnvidia-ml\.so\.1 not found/);
    expect(mig.stdout).toMatch(/0\/mig0\s+h100-80g-mig-3g\.40gb\s+\d+\/40448 MiB\s+\d+C\s+\d+W\s+-/);
    expect(mig.stdout).toMatch(/0\/mig1\s+h100-80g-mig-2g\.20gb/);
    expect(mig.stdout).toMatch(/\d+ \S+ \(\d+ MiB\)/);
    const json = JSON.parse((await ctl(['node', 'show', 'h100-node', '--json'])).stdout);
    expect(json.devices.map((d: { id: number }) => d.id)).toEqual([1000, 1001, 1002]);
    expect(json.devices.every((d: { utilization_pct?: number }) => d.utilization_pct === undefined)).toBe(
      true,
    );
    const left = await ctl(['node', 'show', 'nvml-node']);
    expect(left.stdout).toContain('Discovery:     nvml');
    expect(left.stdout).toMatch(/Left out:\n\s+card 0 \(\S+\): MIG mode with no instances carved/);
    const missing = await ctl(['node', 'show', 'a100-nod']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no node is named "a100-nod"; did you mean "a100-node"?');
  });

  it('shows the cluster in one screen', async () => {
    const r = await ctl(['status']);
    expect(r.stdout).toMatch(/Nodes:\s+3 \(3 ready, 0 not ready\)/);
    // Eight on a100-node, and the whole card beside the uncarved one on nvml-node.
    expect(r.stdout).toMatch(/a100-80g\s+9\s+\d+\s+\d+/);
    expect(r.stdout).toMatch(/h100-80g-mig-3g\.40gb\s+1\s+\d\s+\d/);
    expect(r.stdout).toMatch(/Cards left out:\n\s+nvml-node card 0: MIG mode with no instances carved/);
    const json = JSON.parse((await ctl(['status', '--json'])).stdout);
    expect(json.nodes).toEqual({ total: 3, ready: 3, not_ready: 0 });
  });

  it('marks a node not ready when its agent stops, with when it was last seen', async () => {
    const extra = await startAgent('short-lived', {
      LLMGW_NVML_LIBRARY: '/nonexistent',
      LLMGW_NVIDIA_SMI: '/nonexistent',
    });
    expect(await extra.stop()).toBe(0);
    let r = await ctl(['nodes']);
    for (let i = 0; i < 50 && !/short-lived\s+NotReady/.test(r.stdout); i++) {
      await new Promise((res) => setTimeout(res, 100));
      r = await ctl(['nodes']);
    }
    expect(r.stdout).toMatch(/short-lived\s+NotReady/);
    const show = await ctl(['node', 'show', 'short-lived']);
    expect(show.stdout).toMatch(/State:\s+NotReady \(no heartbeat since \S+: its agent disconnected/);
    expect((await ctl(['node', 'rm', 'short-lived'])).stdout.trim()).toBe('node "short-lived" removed');
  });

  it('makes, lists and revokes join tokens; an agent with a revoked token is refused on both sides and exits 1', async () => {
    const made = await ctl(['node', 'token', '--name', 'doomed', '--expires', '1h']);
    expect(made.stdout).toMatch(
      /join token "doomed" created, valid until \S+\. It is shown only this once:\n\n {2}llmgw_join_\w+/,
    );
    expect(made.stdout).toContain(`llmgw agent --server ${url} --token llmgw_join_`);
    const secret = /(llmgw_join_\w+)/.exec(made.stdout)![1]!;
    expect((await ctl(['node', 'tokens'])).stdout).toMatch(/doomed\s+llmgw_join_\w{4}\.\.\.\s+\S+\s+\S+\s+0/);
    expect((await ctl(['node', 'token', 'revoke', 'doomed'])).stdout.trim()).toBe(
      'join token "doomed" revoked',
    );
    const refused = await llmgw(['agent', '--server', url, '--token', secret, '--name', 'refused'], {
      LLMGW_DATA_DIR: join(dir, 'refused'),
      LLMGW_NVML_LIBRARY: '/x',
      LLMGW_NVIDIA_SMI: '/x',
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /error: the join token "doomed" was revoked at \S+: make a new one with llmgw ctl node token/,
    );
    expect(server.output()).toMatch(/"reason":"the join token \\"doomed\\" was revoked/);
    expect((await ctl(['node', 'show', 'refused'])).code).toBe(1);
    const badExpiry = await ctl(['node', 'token', '--expires', 'tomorrow']);
    expect(badExpiry.code).toBe(2);
    expect(badExpiry.stderr).toContain('--expires tomorrow is not a duration: write e.g. 30m, 24h or 7d');
  });

  describe('llmgw doctor', () => {
    const doctor = (extra: Record<string, string>, args: string[] = []) =>
      llmgw(['doctor', '--json', ...args], {
        LLMGW_DATA_DIR: join(dir, 'doctor'),
        LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
        ...extra,
      });

    it('reports the working path, why the other failed, cards, MIG instances, and exits 0 when all can run', async () => {
      const r = await doctor({ FAKE_NVIDIA_SMI_FIXTURE: 'h100-mig-590' });
      expect(r.code).toBe(0);
      const report = JSON.parse(r.stdout);
      expect(report.discovery.method).toBe('nvidia-smi');
      expect(report.discovery.reasons[0]).toMatch(/^nvml: \/nonexistent\/libnvidia-ml\.so\.1 not found/);
      expect(report).toMatchObject({ driver_version: '590.48.01', cuda_version: '13.1' });
      const [card] = report.cards;
      expect(card).toMatchObject({ index: 0, class: 'h100-80g', mode: 'mig' });
      expect(card.utilization_pct).toBeUndefined();
      expect(
        card.instances.map(
          (i: { id: number; label: string; profile: string }) => `${i.id} ${i.label} ${i.profile}`,
        ),
      ).toEqual(['1000 0/mig0 3g.40gb', '1001 0/mig1 2g.20gb', '1002 0/mig2 1g.10gb']);
      for (const key of ['uuid', 'class', 'memory_total_mib', 'memory_used_mib', 'processes'])
        expect(card.instances[0]).toHaveProperty(key);
      // The fixture's card has had ECC errors: worth a warning, not a failure.
      expect(report.warnings.map((w: { code: string }) => w.code)).toEqual(['ecc_uncorrectable']);
    });

    it.each([
      [
        'mig-none-carved',
        'mig_no_instances',
        /card 0 \(\S+\) can run nothing: MIG mode with no instances carved/,
      ],
      ['mig-pending', 'mig_pending_reset', /waits for a GPU reset/],
      ['no-driver', 'driver_not_loaded', /the driver does not answer .*load it \(modprobe nvidia/],
    ])('warns of %s and exits 1', async (fixture, code, message) => {
      const r = await doctor({ FAKE_NVIDIA_SMI_FIXTURE: fixture });
      expect(r.code).toBe(1);
      const warning = JSON.parse(r.stdout).warnings.find((w: { code: string }) => w.code === code);
      expect(warning?.message).toMatch(message);
    });

    it('finds cards through NVML when its library loads', async () => {
      const r = await doctor({
        LLMGW_NVML_LIBRARY: await buildFakeNvml(),
        FAKE_NVML_SCENARIO: nvmlScenarioFile('whole-cards'),
      });
      const report = JSON.parse(r.stdout);
      expect(report.discovery.method).toBe('nvml');
      expect(report.cards.length).toBeGreaterThan(0);
      expect(report.cards[0].mode).toBe('whole');
    });

    it('fails on a node with no GPU and no CPU engine', async () => {
      const r = await doctor({
        LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
        PATH: '/usr/bin:/bin',
        LLMGW_AGENT_ENGINES_LLAMACPP_BIN: '/nonexistent/llama-server',
      });
      expect(r.code).toBe(1);
      const report = JSON.parse(r.stdout);
      expect(report.discovery).toEqual({
        method: 'none',
        reasons: [expect.stringMatching(/^nvml: /), 'nvidia-smi: /nonexistent/nvidia-smi not found'],
      });
      expect(report.warnings.map((w: { code: string }) => w.code)).toEqual(['no_engine']);
      expect(report.engines.map((e: { name: string }) => e.name)).toEqual([
        'llama-server',
        'vllm',
        'trtllm-serve',
        'sglang',
      ]);
    });

    it('checks the control plane and the join token', async () => {
      const good = await token('doctor-ok');
      const ok = JSON.parse(
        (await doctor({ FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550' }, ['--server', url, '--token', good])).stdout,
      );
      expect(ok.control_plane).toMatchObject({
        url,
        reachable: true,
        token: { accepted: true, name: 'doctor-ok', expires_at: null },
      });
      const bad = JSON.parse(
        (
          await doctor({ FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550' }, [
            '--server',
            url,
            '--token',
            'llmgw_join_wrongwrongwrongwrongwrong',
          ])
        ).stdout,
      );
      expect(bad.warnings).toContainEqual({
        code: 'token_refused',
        message: expect.stringContaining('the join token is not valid'),
        blocking: true,
      });
      // A port the OS just handed out, that nothing listens on: a fixed one may be taken on this machine.
      const closed = `http://127.0.0.1:${await freePort()}`;
      const down = JSON.parse(
        (await doctor({ FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550' }, ['--server', closed])).stdout,
      );
      expect(down.warnings).toContainEqual({
        code: 'control_plane_unreachable',
        message: expect.stringContaining(`${closed} does not answer`),
        blocking: true,
      });
    });

    it('prints a human report', async () => {
      const r = await llmgw(['doctor'], {
        LLMGW_DATA_DIR: join(dir, 'doctor'),
        LLMGW_NVML_LIBRARY: '/nonexistent',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
        FAKE_NVIDIA_SMI_FIXTURE: 'mig-none-carved',
      });
      expect(r.code).toBe(1);
      expect(r.stdout).toContain('Discovery:      nvidia-smi');
      expect(r.stdout).toMatch(/Warnings:\n {2}! mig_no_instances: card 0/);
    });
  });
});
