import { describe, expect, it } from 'vitest';

import { installUnavailable, llamaBin, type LlamaBin, type LlamaBinInput } from './llama-bin.js';

const installed = { bin: '/data/engines/llamacpp/b6000-cpu/llama-server', build: 'b6000', flavour: 'cpu' };
const base: LlamaBinInput = {
  key: 'b6000-cpu',
  installed: undefined,
  local: undefined,
  sent: undefined,
  install: { state: 'not_tried' },
  onPath: undefined,
};
const failed = { state: 'failed', error: 'fetch failed: ENOTFOUND github.com' } as const;

describe('which llama-server runs', () => {
  const cases: [string, Partial<LlamaBinInput>, LlamaBin][] = [
    [
      'an installed build',
      { installed, install: { state: 'installing' }, onPath: '/usr/bin/llama-server' },
      {
        source: 'installed',
        bin: installed.bin,
        why: `installed build b6000 (cpu) at ${installed.bin}`,
      },
    ],
    [
      'an installed build wins over a configured bin',
      { installed, local: '/opt/llama/llama-server', install: { state: 'looking' } },
      {
        source: 'installed',
        bin: installed.bin,
        why: `installed build b6000 (cpu) at ${installed.bin}, which wins over the configured bin agent.engines.llamacpp.bin = /opt/llama/llama-server (this node's settings)`,
      },
    ],
    [
      'a configured bin waits for the look for an installed build',
      { sent: '/opt/cp/llama-server', install: { state: 'looking' } },
      {
        source: 'waiting',
        why: 'looking for a llama.cpp b6000-cpu the agent installed before running the configured /opt/cp/llama-server',
      },
    ],
    [
      "configured: this node's setting",
      { local: '/opt/node/llama-server', install: failed, onPath: '/usr/bin/llama-server' },
      {
        source: 'configured',
        bin: '/opt/node/llama-server',
        why: "configured: agent.engines.llamacpp.bin = /opt/node/llama-server (this node's settings); the agent installs nothing",
      },
    ],
    [
      "configured: this node's setting wins over the control plane's",
      { local: '/opt/node/llama-server', sent: '/opt/cp/llama-server', install: failed },
      {
        source: 'configured',
        bin: '/opt/node/llama-server',
        why: "configured: agent.engines.llamacpp.bin = /opt/node/llama-server (this node's settings); it wins over the control plane's /opt/cp/llama-server; the agent installs nothing",
      },
    ],
    [
      "configured: the control plane's setting",
      { sent: '/opt/cp/llama-server', install: failed },
      {
        source: 'configured',
        bin: '/opt/cp/llama-server',
        why: "configured: agent.engines.llamacpp.bin = /opt/cp/llama-server (the control plane's settings); the agent installs nothing",
      },
    ],
    [
      'while the install runs, shards wait even with one on PATH',
      { install: { state: 'installing', progress: 'downloading 40%' }, onPath: '/usr/bin/llama-server' },
      { source: 'waiting', why: 'installing llama.cpp b6000-cpu (downloading 40%)' },
    ],
    [
      'while the install is tried again after a failure, the one from PATH keeps running',
      {
        install: {
          state: 'installing',
          progress: 'downloading',
          retryOf: 'fetch failed: ENOTFOUND github.com',
        },
        onPath: '/usr/bin/llama-server',
      },
      {
        source: 'path',
        bin: '/usr/bin/llama-server',
        why: "from PATH: /usr/bin/llama-server (nothing installed or configured; the agent's install of llama.cpp b6000-cpu failed (fetch failed: ENOTFOUND github.com) and is being tried again)",
      },
    ],
    [
      'tried again after a failure with nothing on PATH: shards wait for it',
      { install: { state: 'installing', retryOf: 'fetch failed: ENOTFOUND github.com' } },
      { source: 'waiting', why: 'installing llama.cpp b6000-cpu' },
    ],
    [
      'from PATH once the install failed',
      { install: failed, onPath: '/usr/bin/llama-server' },
      {
        source: 'path',
        bin: '/usr/bin/llama-server',
        why: "from PATH: /usr/bin/llama-server (nothing installed or configured; the agent's install of llama.cpp b6000-cpu failed (fetch failed: ENOTFOUND github.com))",
      },
    ],
    [
      'from PATH where the agent installs nothing',
      { install: { state: 'unavailable', reason: 'darwin arm64' }, onPath: '/opt/homebrew/bin/llama-server' },
      {
        source: 'path',
        bin: '/opt/homebrew/bin/llama-server',
        why: 'from PATH: /opt/homebrew/bin/llama-server (nothing installed or configured; the agent cannot install llama.cpp here (darwin arm64))',
      },
    ],
    [
      'none: the install failed and PATH has none',
      { install: failed },
      {
        source: 'none',
        why: "no llama-server to run: the agent's install of llama.cpp b6000-cpu failed (fetch failed: ENOTFOUND github.com), none is configured and PATH has none: set agent.engines.llamacpp.bin to a llama-server, or put one on PATH",
      },
    ],
    [
      'the doctor, before any install: what the agent will do',
      { onPath: '/usr/bin/llama-server' },
      {
        source: 'waiting',
        why: 'not installed yet: the agent installs llama.cpp b6000-cpu when a llama.cpp replica is placed here; should that fail, it runs /usr/bin/llama-server from PATH',
      },
    ],
    [
      'the doctor, before any install, with nothing on PATH',
      {},
      {
        source: 'waiting',
        why: 'not installed yet: the agent installs llama.cpp b6000-cpu when a llama.cpp replica is placed here; PATH has no llama-server to fall back on',
      },
    ],
  ];
  it.each(cases)('%s', (_what, input, want) => {
    expect(llamaBin({ ...base, ...input })).toEqual(want);
  });

  it('says where the agent installs nothing', () => {
    expect(installUnavailable('linux', 'x64')).toBeUndefined();
    expect(installUnavailable('linux', 'arm64')).toBeUndefined();
    expect(installUnavailable('darwin', 'arm64')).toBe(
      'llama.cpp publishes builds the agent installs for Linux x64 and arm64 only, and this node is darwin arm64',
    );
  });
});
