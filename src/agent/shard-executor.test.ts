import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';

import { cpuModel, testEngines } from '../../test/support/assignments.js';
import { freePort } from '../../test/fakes/engines/fake-engines.js';
import type { ModelSpec } from '../catalog/model-spec.js';
import type { AgentMessage, AssignedShard } from '../protocol/agent-protocol.js';

import { ShardExecutor } from './shard-executor.js';
import { Supervisor } from './shards/process/process-supervisor.js';

// What `llmgw ctl logs` of a shard gets from its agent when its engine never ran: the reason
// as the log, not an error that the shard "does not run on this node".

const executors: ShardExecutor[] = [];
afterEach(async () => {
  await Promise.all(executors.splice(0).map((e) => e.stop()));
});

const engines = testEngines(4);
const model = cpuModel;

function assigned(replica: string, m: ModelSpec, port: number): AssignedShard {
  return {
    replica,
    model: m,
    profile: 'cpu',
    rank: 0,
    ranks: 1,
    port,
    devices: [],
    threads: 1,
    api_key: 'llmgw_engine_test',
  };
}

function executor(bin: string): { exec: ShardExecutor; sent: AgentMessage[] } {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-exec-'));
  const sent: AgentMessage[] = [];
  const supervisor = new Supervisor({
    logDir: join(dir, 'logs'),
    onStatus: () => undefined,
    backoff: { initialMs: 60_000, maxMs: 60_000 },
  });
  const exec = new ShardExecutor({
    dataDir: dir,
    logger: pino({ level: 'silent' }),
    supervisor,
    localBins: { llamacpp: bin },
    inventory: () => undefined,
    send: (m) => {
      sent.push(m);
      return true;
    },
    bindHost: '127.0.0.1',
  });
  executors.push(exec);
  return { exec, sent };
}

async function logs(
  exec: ShardExecutor,
  sent: AgentMessage[],
  key: string,
): Promise<Extract<AgentMessage, { type: 'log_lines' }>> {
  const request = `req-${Math.random()}`;
  exec.handle({ type: 'logs', request, key, tail: 100, follow: false });
  for (let i = 0; i < 200; i++) {
    const m = sent.find(
      (x): x is Extract<AgentMessage, { type: 'log_lines' }> =>
        x.type === 'log_lines' && x.request === request,
    );
    if (m !== undefined) return m;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('no answer');
}

describe('the logs of a shard whose engine did not start', () => {
  it('are why it did not start: its weights are not on this node', async () => {
    const { exec, sent } = executor('/nonexistent/llama-server');
    exec.handle({
      type: 'assign',
      shards: [assigned('m-1', model('m', '/nonexistent/m.gguf'), 20000)],
      engines,
    });
    const answer = await logs(exec, sent, 'm-1/0');
    expect(answer.error).toBeUndefined();
    expect(answer.done).toBe(true);
    expect(answer.lines).toEqual([
      "--- llmgw: the engine has not started: the model's weights /nonexistent/m.gguf are not on this node: put them there (the path must be the same on every node), or use a hf:// source",
    ]);
  });

  it('are why it did not start: a hub model came without its pinned files', async () => {
    const { exec, sent } = executor('/nonexistent/llama-server');
    exec.handle({
      type: 'assign',
      shards: [assigned('m-1', model('m', 'hf://org/m-GGUF/m.gguf'), 20000)],
      engines,
    });
    const answer = await logs(exec, sent, 'm-1/0');
    expect(answer.lines).toEqual([
      "--- llmgw: the engine has not started: the control plane sent no pinned files for hf://org/m-GGUF/m.gguf, so this node cannot fetch it: upgrade the control plane to this agent's version, or update the model (llmgw ctl model apply) so its source is resolved again",
    ]);
  });

  it('end with why it is not running: the engine could not be started at all', async () => {
    const { exec, sent } = executor('/nonexistent/llama-server');
    const weights = join(mkdtempSync(join(tmpdir(), 'llmgw-exec-')), 'm.gguf');
    writeFileSync(weights, 'GGUF');
    exec.handle({
      type: 'assign',
      shards: [assigned('m-1', model('m', weights), await freePort())],
      engines,
    });
    const answer = await (async () => {
      for (let i = 0; i < 200; i++) {
        const a = await logs(exec, sent, 'm-1/0');
        // The configured bin runs once no installed build is found (llama-bin.ts): first it waits.
        if (a.lines.at(-1)?.includes('is not running') === true) return a;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error('no lines');
    })();
    expect(answer.error).toBeUndefined();
    expect(answer.lines.at(-1)).toBe(
      '--- llmgw: the engine is not running: cannot start /nonexistent/llama-server: not found; restarting in 60 s',
    );
  });

  it('is refused, saying why and what to do, for a shard this node was not given', async () => {
    const { exec, sent } = executor('/nonexistent/llama-server');
    exec.handle({ type: 'assign', shards: [], engines });
    const answer = await logs(exec, sent, 'other-1/0');
    expect(answer).toMatchObject({
      lines: [],
      done: true,
      error:
        'this node has no shard other-1/0: the assignment that places it there has not reached its agent yet, or it was just removed; try again in a few seconds',
    });
  });
});
