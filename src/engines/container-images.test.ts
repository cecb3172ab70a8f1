import { describe, expect, it } from 'vitest';

import { parseImage, registryProblem } from '../catalog/image-ref.js';
import type { EngineName } from '../catalog/model-spec.js';

import { chooseImage, defaultImage, imageExecutable, onRegistry } from './container-images.js';
import { engineNames } from './registry.js';

// The agent passes agent.engines.llamacpp.build, whose default is this (config/schema.ts defaultLlamaBuild).
const defaultLlamaBuild = 'b10587';

describe('container images', () => {
  const defaults: [EngineName, boolean, string][] = [
    ['llamacpp', true, `ghcr.io/ggml-org/llama.cpp:server-cuda-${defaultLlamaBuild}`],
    ['llamacpp', false, `ghcr.io/ggml-org/llama.cpp:server-${defaultLlamaBuild}`],
    ['vllm', true, 'vllm/vllm-openai:v0.21.0'],
    ['sglang', true, 'lmsysorg/sglang:v0.5.19-cu129'],
    ['trtllm', true, 'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5'],
  ];
  it.each(defaults)('defaults %s (GPU: %s) to %s', (engine, gpu, image) => {
    expect(defaultImage(engine, { gpu, llamaBuild: defaultLlamaBuild })).toBe(image);
    // Every default parses as a reference, with a pinned tag.
    expect(parseImage(image)).toHaveProperty('tag');
  });

  it('runs each engine by its executable inside the image', () => {
    expect(Object.fromEntries(engineNames.map((e) => [e, imageExecutable(e)]))).toEqual({
      llamacpp: '/app/llama-server',
      vllm: 'vllm',
      sglang: 'python3',
      trtllm: 'trtllm-serve',
    });
  });

  const mirrors: [string, string, string][] = [
    ['vllm/vllm-openai:v0.21.0', 'registry.local:5000', 'registry.local:5000/vllm/vllm-openai:v0.21.0'],
    ['docker.io/vllm/vllm-openai:v0.21.0', 'registry.local', 'registry.local/vllm/vllm-openai:v0.21.0'],
    ['ubuntu:24.04', 'registry.local', 'registry.local/library/ubuntu:24.04'],
    [
      'ghcr.io/ggml-org/llama.cpp:server-b1',
      'harbor.local/ghcr/',
      'harbor.local/ghcr/ggml-org/llama.cpp:server-b1',
    ],
    [
      'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5',
      '10.0.0.5:5000',
      '10.0.0.5:5000/nvidia/tensorrt-llm/release:1.3.0rc5',
    ],
    [`localhost:5000/x/y@sha256:${'0'.repeat(64)}`, 'm.local', `m.local/x/y@sha256:${'0'.repeat(64)}`],
  ];
  it.each(mirrors)('moves %s to the mirror %s', (image, registry, moved) => {
    expect(onRegistry(image, registry)).toBe(moved);
  });

  const choices: [string, Parameters<typeof chooseImage>[0], string][] = [
    [
      "the profile's image first",
      {
        engine: 'vllm',
        profileImage: 'a/b:1',
        settingsImage: 'c/d:2',
        registry: 'm.local',
        gpu: true,
        llamaBuild: 'b1',
      },
      'a/b:1',
    ],
    [
      "then the node's setting, as written",
      { engine: 'vllm', settingsImage: 'c/d:2', registry: 'm.local', gpu: true, llamaBuild: 'b1' },
      'c/d:2',
    ],
    ['then the default', { engine: 'sglang', gpu: true, llamaBuild: 'b1' }, 'lmsysorg/sglang:v0.5.19-cu129'],
    [
      'the default on the mirror',
      { engine: 'llamacpp', registry: 'm.local', gpu: false, llamaBuild: 'b42' },
      'm.local/ggml-org/llama.cpp:server-b42',
    ],
  ];
  it.each(choices)('chooses %s', (_what, o, image) => {
    expect(chooseImage(o)).toBe(image);
  });

  const parsed: [string, ReturnType<typeof parseImage>][] = [
    ['vllm/vllm-openai', { path: 'vllm/vllm-openai' }],
    ['ubuntu', { path: 'ubuntu' }],
    ['localhost/x:1', { registry: 'localhost', path: 'x', tag: '1' }],
    ['[::1]:5000/a/b_c__d-e.f:v1.2-rc', { registry: '[::1]:5000', path: 'a/b_c__d-e.f', tag: 'v1.2-rc' }],
    [
      '',
      {
        problem:
          'an image reference is empty: name one, e.g. vllm/vllm-openai:v0.21.0 or registry.example.com:5000/team/vllm:v1',
      },
    ],
    ['a b', { problem: '"a b" is not an image reference: it has white space in it' }],
    [
      'x//y',
      { problem: '"x//y" is not an image reference: its name "x//y" has an empty part between slashes' },
    ],
    ['x/-y', { problem: expect.stringContaining('"-y" is not a name part') as string }],
    [
      'bad_host.x:99999999/y',
      {
        problem: expect.stringContaining(
          'its registry "bad_host.x:99999999" is not HOST or HOST:PORT',
        ) as string,
      },
    ],
  ];
  it.each(parsed)('parses %j', (text, ref) => {
    expect(parseImage(text)).toEqual(ref);
  });

  const registries: [string, string | undefined][] = [
    ['registry.local:5000', undefined],
    ['harbor.local/dockerhub', undefined],
    ['http://registry.local', 'write the registry without http://: "registry.local"'],
    ['harbor.local/Hub', '"Hub" in "harbor.local/Hub" is not a path part of a registry'],
  ];
  it.each(registries)('checks the registry %s', (text, problem) => {
    const p = registryProblem(text);
    if (problem === undefined) expect(p).toBeUndefined();
    else expect(p).toContain(problem);
  });
});
