import { describe, expect, it } from 'vitest';

import { assetName, chooseFlavour, zipAssetName } from './llama-asset.js';

describe('assetName', () => {
  it.each([
    ['b10587', 'cpu', 'x64', 'llama-b10587-bin-ubuntu-x64.tar.gz'],
    ['b10587', 'cpu', 'arm64', 'llama-b10587-bin-ubuntu-arm64.tar.gz'],
    ['b10587', 'vulkan', 'x64', 'llama-b10587-bin-ubuntu-vulkan-x64.tar.gz'],
    ['b1', 'cpu', 'x64', 'llama-b1-bin-ubuntu-x64.tar.gz'],
  ] as const)('%s %s %s -> %s', (build, flavour, arch, name) => {
    expect(assetName(build, flavour, arch)).toBe(name);
  });

  it('names the .zip older builds shipped', () => {
    expect(zipAssetName('b6558', 'cpu', 'x64')).toBe('llama-b6558-bin-ubuntu-x64.zip');
  });

  it.each([
    [
      'b10587',
      'vulkan',
      'arm64',
      /Vulkan build for x64 only, and this node is arm64.*agent\.engines\.llamacpp\.cuda_archive/,
    ],
    [
      'b10587',
      'cpu',
      'ppc64',
      /x64 and arm64 only, and this node is ppc64: set agent\.engines\.llamacpp\.bin/,
    ],
    ['b10587', 'cuda', 'x64', /no Linux CUDA build.*agent\.engines\.llamacpp\.cuda_archive/],
    [
      '10587',
      'cpu',
      'x64',
      /not a llama\.cpp release tag: set agent\.engines\.llamacpp\.build to one such as b10587/,
    ],
    ['b1/../../x', 'cpu', 'x64', /not a llama\.cpp release tag/],
  ] as const)('refuses %s %s %s', (build, flavour, arch, message) => {
    expect(() => assetName(build, flavour, arch)).toThrow(message);
  });
});

describe('chooseFlavour', () => {
  const archive = 'https://mirror.example/llama-b10587-cuda-12.8-x64.tar.gz';
  it.each([
    // nvidia, mig, archive, arch, flavour, warns
    [false, false, undefined, 'x64', 'cpu', false],
    [false, false, archive, 'x64', 'cpu', false],
    [true, false, undefined, 'x64', 'vulkan', false],
    [true, false, '', 'x64', 'vulkan', false],
    [true, false, archive, 'x64', 'cuda', false],
    [true, true, archive, 'x64', 'cuda', false],
    [true, true, undefined, 'x64', 'vulkan', true],
    [false, true, undefined, 'x64', 'vulkan', true],
    [true, false, undefined, 'arm64', 'cpu', true],
    [true, false, archive, 'arm64', 'cuda', false],
    [false, false, undefined, 'arm64', 'cpu', false],
  ] as const)('nvidia=%s mig=%s archive=%s %s -> %s', (nvidia, mig, cuda, arch, flavour, warns) => {
    const chosen = chooseFlavour(nvidia, mig, cuda, arch);
    expect(chosen.flavour).toBe(flavour);
    expect(chosen.warning !== undefined).toBe(warns);
  });

  it('says why MIG needs a CUDA archive, naming the setting', () => {
    const { warning } = chooseFlavour(true, true, undefined);
    expect(warning).toMatch(/Vulkan cannot open/);
    expect(warning).toMatch(/llama\.cpp replicas on MIG need a CUDA build/);
    expect(warning).toContain('agent.engines.llamacpp.cuda_archive');
  });

  it('defaults to x64', () => {
    expect(chooseFlavour(true, false, undefined)).toEqual({ flavour: 'vulkan' });
  });
});
