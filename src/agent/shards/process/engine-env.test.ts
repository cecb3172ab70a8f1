import { describe, expect, it } from 'vitest';

import { engineEnv } from './engine-env.js';

describe('engineEnv', () => {
  it.each([
    [
      "a program's basics",
      {
        PATH: '/usr/bin',
        HOME: '/home/a',
        LANG: 'C.UTF-8',
        LC_ALL: 'C',
        TZ: 'UTC',
        TMPDIR: '/tmp',
        USER: 'a',
      },
      true,
    ],
    [
      "the machine's libraries and devices",
      {
        LD_LIBRARY_PATH: '/usr/local/cuda/lib64',
        CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
        NVIDIA_DRIVER_CAPABILITIES: 'compute',
        NCCL_SOCKET_IFNAME: 'eth0',
        GLOO_SOCKET_IFNAME: 'eth0',
      },
      true,
    ],
    [
      'the network',
      {
        HF_ENDPOINT: 'https://mirror',
        HTTPS_PROXY: 'http://proxy:3128',
        no_proxy: 'localhost',
        SSL_CERT_FILE: '/etc/ssl/ca.pem',
      },
      true,
    ],
    [
      "llmgw's own settings and secrets",
      {
        LLMGW_ADMIN_KEY: 'llmgw_key_x',
        LLMGW_DATABASE: 'postgres://u:p@db/llmgw',
        LLMGW_DATA_DIR: '/var/lib/llmgw',
        llmgw_key: 'x',
      },
      false,
    ],
    [
      'a hub token: only the downloader uses it',
      {
        HF_TOKEN: 'hf_x',
        HUGGING_FACE_HUB_TOKEN: 'hf_x',
        HUGGINGFACEHUB_API_TOKEN: 'hf_x',
        HF_TOKEN_PATH: '/t',
      },
      false,
    ],
    [
      "anything else of the agent's",
      {
        DATABASE_URL: 'postgres://u:p@db/x',
        AWS_SECRET_ACCESS_KEY: 'x',
        GITHUB_TOKEN: 'x',
        SSH_AUTH_SOCK: '/tmp/agent',
        VLLM_API_KEY: 'x',
        LLAMA_API_KEY: 'x',
        XDG_CONFIG_HOME: '/x',
      },
      false,
    ],
  ])('%s: %s', (_what, env: Record<string, string>, kept) => {
    expect(engineEnv(env)).toEqual(kept ? env : {});
  });
});
