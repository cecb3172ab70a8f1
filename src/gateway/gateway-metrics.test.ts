import { describe, expect, it } from 'vitest';

import { GatewayMetrics, MetricLabels } from './gateway-metrics.js';

const catalog = [
  { name: 'chat', adapters: ['sql'], engines: ['vllm'] },
  { name: 'tiny', adapters: [], engines: ['llamacpp'] },
];

describe('metric labels', () => {
  it('come from bounded sets only: catalog names, key names, HTTP statuses', () => {
    const l = new MetricLabels();
    l.setCatalog(catalog);
    const models: [string | undefined, string][] = [
      ['chat', 'chat'],
      ['chat:sql', 'chat:sql'],
      ['tiny', 'tiny'],
      ['chat:nope', 'unknown'],
      ['chatt', 'unknown'],
      ['x'.repeat(1024 * 1024), 'unknown'],
      ['llmgw_key_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345', 'unknown'],
      ['', 'unknown'],
      [undefined, '-'],
    ];
    for (const [name, label] of models)
      expect({ name: name?.slice(0, 20), label: l.model(name) }).toEqual({ name: name?.slice(0, 20), label });
    expect(l.key('team-a')).toBe('team-a');
    expect(l.key(undefined)).toBe('-');
    expect([200, 404, 499, 501, 599, 600, 99, 1e9, 2.5].map((s) => l.status(s))).toEqual([
      '200',
      '404',
      '499',
      '501',
      '599',
      'other',
      'other',
      'other',
      'other',
    ]);
  });

  it('follow the catalog: a model removed is unknown from then on', () => {
    const l = new MetricLabels();
    l.setCatalog(catalog);
    l.setCatalog([{ name: 'tiny', adapters: [], engines: ['llamacpp'] }]);
    expect(l.model('chat')).toBe('unknown');
    expect(l.model('tiny')).toBe('tiny');
  });
});

describe('gateway metrics', () => {
  it('add at most one series for every model name clients make up', async () => {
    const m = new GatewayMetrics(
      () => [],
      () => 0,
    );
    m.setCatalog(catalog);
    m.answered('chat', 'admin', 200, 0.01);
    const before = await m.registry.metrics();
    for (let i = 0; i < 500; i++) {
      const name = `${Math.random().toString(36)}-${'y'.repeat(i * 100)}`;
      m.answered(name, 'admin', 404, 0.001);
      m.refused(name, 'admin', 'model_not_found');
      m.retry(name);
      m.ttftFor(name).observe(0.1);
      m.countTokens(name, 'admin', 1, 1);
    }
    const after = await m.registry.metrics();
    expect(after).toContain('llmgw_gateway_requests_total{model="unknown",key="admin",status="404"} 500');
    expect(after).toContain(
      'llmgw_gateway_errors_total{model="unknown",key="admin",code="model_not_found"} 500',
    );
    expect(after).toContain('llmgw_gateway_requests_total{model="chat",key="admin",status="200"} 1');
    expect(after).not.toContain('yyyy');
    // One model's worth of series more, whatever was sent.
    expect(after.split('\n').length - before.split('\n').length).toBeLessThan(100);
    expect(after.length).toBeLessThan(64 * 1024);
  });
});
