import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { writeGguf } from '../../test/fakes/gguf/writer.js';
import { qwen25_7b } from '../../test/fakes/gguf/models.js';
import { writeSafetensors } from '../../test/fakes/safetensors/writer.js';
import { localWalk, resolveLocalSource, type OwnPath } from './local-source.js';

const serves =
  'a local source is a model: a GGUF file, a safetensors file, or a folder with a config.json and weights';
const gguf = writeGguf({ metadata: qwen25_7b });
const weights = writeSafetensors([{ name: 'lm_head.weight', dtype: 'BF16', shape: [4, 4], bytes: 32 }]);
const config = Buffer.from('{"architectures":["Qwen2ForCausalLM"],"num_hidden_layers":24}');

describe('resolveLocalSource', () => {
  let dir = '';
  let data = '';
  let own: OwnPath[] = [];
  let socketServer: Server;

  const folder = (name: string, files: Record<string, Buffer | string>): string => {
    const root = join(dir, name);
    for (const [path, body] of Object.entries(files)) {
      mkdirSync(join(root, path, '..'), { recursive: true });
      writeFileSync(join(root, path), body);
    }
    mkdirSync(root, { recursive: true });
    return root;
  };
  const refusal = async (path: string, ownPaths = own) => {
    const e = await resolveLocalSource(path, ownPaths).then(
      () => undefined,
      (err: unknown) => err as { code: string; message: string },
    );
    expect(e, `${path} was taken`).toBeDefined();
    expect(e?.code).toBe('invalid_argument');
    return e?.message;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-local-source-'));
    data = join(dir, 'data');
    mkdirSync(join(data, 'mirror'), { recursive: true });
    writeFileSync(
      join(data, 'llmgw.db'),
      Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(84)]),
    );
    writeFileSync(join(data, 'engine-key.secret'), 'c2VjcmV0\n');
    // The mirror holds real model files: the data dir is refused for what it is, not for what it holds.
    writeFileSync(join(data, 'mirror', 'm.gguf'), gguf);
    writeFileSync(join(dir, 'elsewhere.db'), 'SQLite format 3\0');
    own = [
      { path: data, what: "the control plane's data dir" },
      { path: join(dir, 'elsewhere.db'), what: "the control plane's database" },
    ];
    socketServer = createServer();
    await new Promise<void>((r) => socketServer.listen(join(dir, 'llmgw.sock'), r));
  });
  afterAll(async () => {
    await new Promise<void>((r) => socketServer.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('takes a GGUF file and a safetensors file, with their sizes', async () => {
    writeFileSync(join(dir, 'qwen.gguf'), gguf);
    writeFileSync(join(dir, 'model.safetensors'), weights);
    expect(await resolveLocalSource(join(dir, 'qwen.gguf'), own)).toEqual({
      source: join(dir, 'qwen.gguf'),
      kind: 'path',
      revision: '',
      files: [{ path: 'qwen.gguf', size: gguf.length }],
    });
    expect((await resolveLocalSource(join(dir, 'model.safetensors'), own)).files).toEqual([
      { path: 'model.safetensors', size: weights.length },
    ]);
  });

  it("takes a model's folder: config.json beside weights, linked as a Hugging Face snapshot links them", async () => {
    const root = folder('qwen-st', {
      'config.json': config,
      'tokenizer.json': '{}',
      'original/params.json': '{}',
      '.git/HEAD': 'ref: refs/heads/main\n',
    });
    writeFileSync(join(dir, 'blob-weights'), weights);
    symlinkSync(join(dir, 'blob-weights'), join(root, 'model.safetensors'));
    symlinkSync(join(dir, 'nowhere'), join(root, 'dangling.json'));
    expect((await resolveLocalSource(root, own)).files).toEqual([
      { path: 'config.json', size: config.length },
      { path: 'model.safetensors', size: weights.length },
      { path: 'original/params.json', size: 2 },
      { path: 'tokenizer.json', size: 2 },
    ]);
    const ggufs = folder('qwen-gguf', { 'Q4_K_M/qwen-q4_k_m.gguf': gguf, 'README.md': '# qwen\n' });
    expect((await resolveLocalSource(ggufs, own)).files.map((f) => f.path)).toEqual([
      'Q4_K_M/qwen-q4_k_m.gguf',
      'README.md',
    ]);
  });

  it('says a path this machine lacks is not here (it may be on the nodes only)', async () => {
    await expect(resolveLocalSource(join(dir, 'nope', 'm.gguf'), own)).rejects.toMatchObject({
      code: 'not_found',
      message: `there is no file or directory at ${join(dir, 'nope', 'm.gguf')}: check the path`,
    });
  });

  it('refuses files that are not models, quoting none of their bytes', async () => {
    const shadow = await refusal('/etc/shadow');
    // Unreadable to anyone but root; root reads it, and it is no model.
    expect(shadow).toBe(
      process.getuid?.() === 0
        ? `/etc/shadow is neither a GGUF file (it would start with the bytes GGUF) nor a safetensors file (an 8-byte header length, then a JSON header): ${serves}`
        : 'llmgw cannot read /etc/shadow (permission denied): the control plane checks that a local source is a model before it takes it; make it readable by the user llmgw runs as',
    );
    writeFileSync(join(dir, 'notes.gguf'), 'HF_TOKEN=hf_secretvalue\n');
    expect(await refusal(join(dir, 'notes.gguf'))).toBe(
      `${join(dir, 'notes.gguf')} is not a GGUF file: it does not start with the bytes GGUF: ${serves}`,
    );
    writeFileSync(join(dir, 'empty.gguf'), '');
    expect(await refusal(join(dir, 'empty.gguf'))).toBe(`${join(dir, 'empty.gguf')} is empty: ${serves}`);
  });

  it("refuses the kernel's files, devices, FIFOs and sockets from stat, without opening them", async () => {
    expect(await refusal('/proc/self/environ')).toBe(
      `/proc/self/environ is on procfs (/proc), the kernel's own files, not a model file on a disk: ${serves}`,
    );
    expect(await refusal('/sys/kernel')).toBe(
      `/sys/kernel is on sysfs (/sys), the kernel's own files, not a model file on a disk: ${serves}`,
    );
    expect(await refusal('/dev/zero')).toBe(`/dev/zero is a character device: ${serves}`);
    // Opening a FIFO with no writer would wait forever: this answers at once.
    execFileSync('mkfifo', [join(dir, 'pipe.gguf')]);
    expect(await refusal(join(dir, 'pipe.gguf'))).toBe(
      `${join(dir, 'pipe.gguf')} is a FIFO (named pipe): ${serves}`,
    );
    expect(await refusal(join(dir, 'llmgw.sock'))).toBe(`${join(dir, 'llmgw.sock')} is a socket: ${serves}`);
    // Through a link, too: what it names is what counts.
    symlinkSync('/proc/self/environ', join(dir, 'environ.gguf'));
    expect(await refusal(join(dir, 'environ.gguf'))).toBe(
      `${join(dir, 'environ.gguf')} is on procfs (/proc), the kernel's own files, not a model file on a disk: ${serves}`,
    );
  });

  it("refuses the control plane's own data, and any folder that holds it", async () => {
    const cases: [string, string][] = [
      [
        data,
        `${data} is the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`,
      ],
      [
        join(data, 'llmgw.db'),
        `${join(data, 'llmgw.db')} is inside the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`,
      ],
      [
        join(data, 'engine-key.secret'),
        `${join(data, 'engine-key.secret')} is inside the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`,
      ],
      [
        join(data, 'mirror', 'm.gguf'),
        `${join(data, 'mirror', 'm.gguf')} is inside the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`,
      ],
      [
        join(dir, 'elsewhere.db'),
        `${join(dir, 'elsewhere.db')} is the control plane's database: llmgw never serves its own data; point source at a model's file or folder`,
      ],
      [
        '/',
        `/ holds the control plane's data dir (${data}): point source at the model's own folder, not one that holds llmgw's data`,
      ],
      [
        dir,
        `${dir} holds the control plane's data dir (${data}): point source at the model's own folder, not one that holds llmgw's data`,
      ],
    ];
    for (const [path, message] of cases) expect(await refusal(path)).toBe(message);
    // A link to it, given as the source or found in a model's folder.
    symlinkSync(join(data, 'llmgw.db'), join(dir, 'db-link.safetensors'));
    expect(await refusal(join(dir, 'db-link.safetensors'))).toBe(
      `${join(dir, 'db-link.safetensors')} is inside the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`,
    );
    const root = folder('with-link', { 'config.json': config, 'model.safetensors': weights });
    symlinkSync(join(data, 'engine-key.secret'), join(root, 'key.txt'));
    expect(await refusal(root)).toBe(
      `${join(root, 'key.txt')} is inside the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`,
    );
  });

  it('refuses a folder without a model, or one whose weights or config are not what they say', async () => {
    const noModel = `holds no model: llmgw looks for a config.json with weights beside it (*.safetensors or *.bin) or for .gguf files, ${localWalk.depth} folders deep at most; point source at the model's own folder, or at its file`;
    const docs = folder('docs', { 'README.md': '# notes\n', 'config.json': config, 'mmproj-f16.gguf': gguf });
    expect(await refusal(docs)).toBe(`${docs} ${noModel}`);
    const deep = folder('deep', { 'a/b/c/d/m.gguf': gguf });
    expect(await refusal(deep)).toBe(`${deep} ${noModel}`);
    const badWeights = folder('bad-weights', { 'config.json': config, 'model.safetensors': 'not weights' });
    expect(await refusal(badWeights)).toBe(
      `${join(badWeights, 'model.safetensors')} is not a safetensors file: its first 8 bytes give a header length outside 2 to 100000000 bytes: ${serves}`,
    );
    const badConfig = folder('bad-config', {
      'config.json': 'architectures: [x]',
      'model.safetensors': weights,
    });
    expect(await refusal(badConfig)).toBe(`${join(badConfig, 'config.json')} is not JSON: ${serves}`);
  });

  it('walks no more than its bound, and says how to point at the model instead', async () => {
    const root = join(dir, 'huge');
    mkdirSync(root);
    for (let i = 0; i <= localWalk.entries; i++) writeFileSync(join(root, `f${i}.txt`), '');
    writeFileSync(join(root, 'm.gguf'), gguf);
    expect(await refusal(root)).toBe(
      `${root} holds more than ${localWalk.entries} files and folders: llmgw looks at no more than ${localWalk.entries}, ${localWalk.depth} folders deep, for a model; point source at the model's own folder (the one with its config.json and weights, or its .gguf files), or at its file`,
    );
  });
});
