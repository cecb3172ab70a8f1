import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadSettings, SettingsError } from './load.js';

function load(text: string, env: Record<string, string> = {}) {
  const d = mkdtempSync(join(tmpdir(), 'llmgw-containers-'));
  writeFileSync(join(d, 'llmgw.yaml'), text);
  return loadSettings({
    path: join(d, 'llmgw.yaml'),
    env: { LLMGW_DATA_DIR: join(d, 'data'), ...env },
    cwd: d,
  });
}

function refused(text: string, env: Record<string, string> = {}): string {
  try {
    load(text, env);
  } catch (e) {
    if (e instanceof SettingsError) return e.message;
    throw e;
  }
  throw new Error('expected the settings to be refused');
}

const agent = (lines: string) => `agent:\n  containers:\n${lines}\n`;

describe('agent.containers settings', () => {
  it('has defaults: auto daemon and GPUs, pull when missing, the host IPC namespace', () => {
    expect(load('').settings.agent.containers).toEqual({
      runtime: 'auto',
      host: '',
      gpus: 'auto',
      images: {},
      registry: '',
      pull: 'missing',
      ipc: 'host',
      shm_size_gb: 16,
      orphan_grace_s: 300,
    });
  });

  it('reads every key, from the file and from the environment', () => {
    const { settings } = load(
      agent(
        [
          '    runtime: podman',
          '    host: unix:///run/podman/podman.sock',
          '    gpus: cdi',
          '    images: {vllm: registry.local:5000/vllm/vllm-openai:v0.21.0}',
          '    pull: never',
          '    ipc: private',
          '    shm_size_gb: 32',
        ].join('\n'),
      ),
      { LLMGW_AGENT_CONTAINERS_REGISTRY: 'harbor.local/hub', LLMGW_AGENT_CONTAINERS_ORPHAN_GRACE_S: '60' },
    );
    expect(settings.agent.containers).toEqual({
      runtime: 'podman',
      host: 'unix:///run/podman/podman.sock',
      gpus: 'cdi',
      images: { vllm: 'registry.local:5000/vllm/vllm-openai:v0.21.0' },
      registry: 'harbor.local/hub',
      pull: 'never',
      ipc: 'private',
      shm_size_gb: 32,
      orphan_grace_s: 60,
    });
  });

  const refusals: [string, string, string][] = [
    ['an unknown runtime', '    runtime: containerd', 'auto, docker or podman'],
    [
      'a host that is a path',
      '    host: /var/run/docker.sock',
      'unix:///PATH (e.g. unix:///var/run/docker.sock) or tcp://HOST:PORT',
    ],
    ['an unknown GPU kind', '    gpus: amd', 'auto, nvidia (the NVIDIA Container Toolkit runtime) or cdi'],
    ['an image for no engine', '    images: {vlm: x/y:1}', 'vlm'],
    [
      'a malformed image',
      '    images: {sglang: "lmsysorg/SGLang:v1"}',
      'names are lower case: write "lmsysorg/sglang:v1"',
    ],
    [
      'a registry with a scheme',
      '    registry: https://registry.local:5000/',
      'write the registry without https://: "registry.local:5000"',
    ],
    ['a registry that is no host', '    registry: "reg istry"', 'is not a registry: write HOST or HOST:PORT'],
    [
      'an unknown pull policy',
      '    pull: sometimes',
      'missing (pull an image the node lacks), always or never',
    ],
    ['an unknown IPC mode', '    ipc: shareable', "host (share the node's IPC namespace) or private"],
    ['a tiny /dev/shm', '    shm_size_gb: 0', 'at least 0.064 GB'],
    ['a negative grace', '    orphan_grace_s: -1', 'at least 0 s (remove at once)'],
  ];
  it.each(refusals)('refuses %s, saying what to write', (_what, lines, words) => {
    const message = refused(agent(lines));
    expect(message).toContain('agent.containers.');
    expect(message).toContain(words);
  });
});
