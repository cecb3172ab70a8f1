import { describe, expect, it } from 'vitest';

import type { ModelView } from '../../protocol/model-views.js';

import { profilesSummary } from './model-detail.js';

describe('the profiles of a model as ctl shows them', () => {
  it('marks container profiles, with their image when one is set', () => {
    const base = { tp: 1, pp: 1, gpus_per_node: 1, nodes: 1, args: [], env: {}, adapters: [] };
    const m = {
      profiles: [
        { ...base, name: 'a', engine: 'vllm', gpu_class: 'h100-80g' },
        { ...base, name: 'b', engine: 'vllm', gpu_class: 'h100-80g', runtime: 'container' },
        { ...base, name: 'c', engine: 'llamacpp', cpu: true, runtime: 'container', image: 'r.local/l:1' },
      ],
    } as Pick<ModelView, 'profiles'> as ModelView;
    expect(profilesSummary(m)).toBe(
      'a:vllm@h100-80g,b:vllm@h100-80g[container],c:llamacpp@cpu[container r.local/l:1]',
    );
  });
});
