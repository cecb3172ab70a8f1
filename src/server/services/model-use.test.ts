import { describe, expect, it } from 'vitest';

import { routeReplica } from '../../../test/support/route-replica.js';
import type { ModelView } from '../../protocol/model-views.js';
import type { RouteReplica, RouteTable } from '../../protocol/routes.js';
import { mayRead, modelUseView } from './model-use.js';

const model = (extra: Partial<ModelView> = {}): ModelView => ({
  name: 'chat',
  source: '/models/secret-path/chat.gguf',
  replicas: 2,
  profiles: [
    {
      name: 'a',
      engine: 'llamacpp',
      cpu: true,
      tp: 1,
      pp: 1,
      gpus_per_node: 0,
      nodes: 1,
      args: ['--api-key-file', '/etc/key'],
      env: { TOKEN: 'secret' },
      adapters: [{ name: 'sql', path: '/adapters/sql' }],
    },
    {
      name: 'b',
      engine: 'vllm',
      gpu_class: 'l4-24g',
      tp: 1,
      pp: 1,
      gpus_per_node: 1,
      nodes: 1,
      args: [],
      env: {},
      adapters: [
        { name: 'sql', path: '/adapters/sql' },
        { name: 'code', path: '/adapters/code' },
      ],
    },
  ],
  metadata: { origin: 'api', version: 1 },
  status: { origin: { source: '/models/secret-path/chat.gguf', kind: 'path', revision: '', files: [] } },
  ...extra,
});

const replica = (model: string): RouteReplica =>
  routeReplica(`${model}-1`, { model, endpoint: 'http://10.0.0.7:9000', capacity: 4 });
const table = (replicas: RouteReplica[], entry: Partial<RouteTable['models'][number]> = {}): RouteTable => ({
  replicas,
  models: [{ name: 'chat', adapters: [], engines: ['llamacpp'], ...entry }],
});

describe('modelUseView', () => {
  it.each<[string, ModelView, RouteTable, ReturnType<typeof modelUseView>['state'], number]>([
    [
      'ready while a replica answers',
      model(),
      table([replica('chat'), replica('chat'), replica('other')]),
      'ready',
      2,
    ],
    ['starting while none answers yet', model(), table([]), 'starting', 0],
    [
      'unavailable when none will answer by itself',
      model(),
      table([], { unavailable: 'replica chat-1 failed: weights not on node gpu-3' }),
      'unavailable',
      0,
    ],
    [
      'stopped at 0 replicas',
      model({ replicas: 0 }),
      table([], { unavailable: 'scaled to 0' }),
      'stopped',
      0,
    ],
    [
      'scaled to zero when autoscaled and idle',
      model({
        autoscale: { min: 0, max: 2, target: 0.7, idle_s: 300 },
        status: { scale: { replicas: 0 } },
      }),
      table([], { wakeable: true }),
      'scaled_to_zero',
      0,
    ],
  ])('is %s', (_what, m, t, state, ready) => {
    const v = modelUseView(m, t);
    expect(v).toEqual({ name: 'chat', state, ready_replicas: ready, adapters: ['sql', 'code'] });
    // Nothing of where it runs or how: no path, args, env, node or reason.
    expect(JSON.stringify(v)).not.toMatch(/secret|\/etc|10\.0\.0|gpu-3|api-key/);
  });

  it('gives the context and output a client may ask for', () => {
    expect(modelUseView(model({ context_length: 8192, max_output: 1024 }), table([]))).toMatchObject({
      context_length: 8192,
      max_output: 1024,
    });
  });
});

describe('mayRead', () => {
  it.each<[string[] | null, string, boolean]>([
    [null, 'chat', true],
    [['chat'], 'chat', true],
    [['chat'], 'other', false],
    [[], 'chat', false],
  ])('a key limited to %j reads %s: %s', (allowed, name, ok) => {
    expect(mayRead(allowed, name)).toBe(ok);
  });
});
