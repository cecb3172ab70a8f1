import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { GatewayMetrics } from '../src/gateway/gateway-metrics.js';
import type { ReplicaLoad } from '../src/gateway/router/types.js';
import type { ReplicaView } from '../src/protocol/replica-views.js';
import { Autoscaler } from '../src/server/autoscale/autoscaler.js';
import type { ModelSpec } from '../src/catalog/model-spec.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { pino } from 'pino';

import {
  addLabels,
  metricType,
  namesIn,
  parseExposition,
  seriesOf,
  type Family,
  type MetricType,
} from './support/promql-names.js';

/**
 * deploy/grafana/llmgw.json reads only series that llmgw or the engines export: llmgw's names
 * come from its real prom-client registries, the engines' from their real /metrics texts
 * (test/fixtures/metrics/README.md says where each comes from).
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const dashboardPath = join(root, 'deploy/grafana/llmgw.json');
const fixtures = join(root, 'test/fixtures/metrics');

/**
 * The gateway's registry after one request of each kind and with one replica, so that every
 * family has samples and the label values the dashboard filters on can be checked.
 */
function gatewayRegistry(): Registry {
  const replica: ReplicaLoad = {
    id: 'tiny-1',
    model: 'tiny',
    inFlight: 1,
    reading: { running: 1, waiting: 1, kvUsage: 0.5, at: 0 },
    stale: true,
    breaker: 'open',
    score: 3,
  };
  const m = new GatewayMetrics(
    () => [replica],
    () => 1,
    () => new Map([['tiny', 2]]),
  );
  m.setCatalog([{ name: 'tiny', adapters: [], engines: ['vllm'] }]);
  m.answered('tiny', 'team-a', 200, 0.5);
  m.refused('tiny', 'team-a', 'no_replica');
  m.countTokens('tiny', 'team-a', 10, 5);
  m.ttftFor('tiny').observe(0.1);
  m.itlFor('tiny').observe(0.01);
  m.retry('tiny');
  m.coldStarted('tiny', 4.2);
  return m.registry;
}

/**
 * The autoscaler's registry (decisions, desired counts, replicas by state) after one real
 * decision: a queue on a model at one replica scales it up, on a store of its own.
 */
async function autoscalerRegistry(): Promise<Registry> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-grafana-'));
  const store = await openSqliteStore({ path: join(dir, 'llmgw.db') });
  try {
    const spec: ModelSpec = {
      name: 'tiny',
      source: '/models/tiny.gguf',
      replicas: 1,
      autoscale: { min: 1, max: 4, target: 0.5, idle_s: 60 },
      profiles: [],
    };
    const a = new Autoscaler({
      store,
      specs: () => Promise.resolve([spec]),
      fleet: {
        leads: true,
        poke: () => undefined,
        settled: () => Promise.resolve(),
        replicas: () => [{ id: 'tiny-1', model: 'tiny', state: 'ready' } as ReplicaView],
        rollout: () => Promise.resolve(undefined),
      },
      settings: () => ({ interval_s: 60, scale_down_window_s: 300, scale_up_step: 4, report_ttl_s: 5 }),
      logger: pino({ level: 'silent' }),
      controlPlaneId: 'cp',
      shared: false,
    });
    await a.report({
      gateway: 'g',
      at: Date.now(),
      models: [
        {
          model: 'tiny',
          queued: 8,
          inFlight: 4,
          requests: 12,
          lastRequestAt: Date.now(),
          replicas: [{ id: 'tiny-1', running: 4, waiting: 0, capacity: 4, inFlight: 4, stale: false }],
        },
      ],
    });
    await a.tick();
    return a.metrics;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Every registry llmgw's /metrics serves: adding one is one line here. Give it samples (as
 * gatewayRegistry does): the labels and values the dashboard filters on are read from them.
 */
const registries: { source: string; registry: () => Registry | Promise<Registry> }[] = [
  { source: 'src/gateway/gateway-metrics.ts', registry: gatewayRegistry },
  { source: 'src/server/autoscale/autoscaler.ts', registry: autoscalerRegistry },
];

/**
 * Named by the dashboard, exported by issue 15's parts not yet merged (autoscaler, scale to
 * zero). Not counted as exported: each has an `it.fails` below that starts failing once its
 * registry is listed above, and then its entry goes. The lead resolves these at merge.
 */
const pending: { name: string; type: MetricType; by: string }[] = [];

async function llmgwFamilies(): Promise<Family[]> {
  const out: Family[] = [];
  for (const r of registries)
    for (const m of await (await r.registry()).getMetricsAsJSON()) {
      const f: Family = {
        name: m.name,
        type: metricType(m.type, `${r.source}: ${m.name}`),
        source: r.source,
        labels: new Map(),
      };
      for (const v of m.values) addLabels(f, v.labels);
      out.push(f);
    }
  return out;
}

function engineFamilies(): Family[] {
  return readdirSync(fixtures)
    .filter((f) => f.endsWith('.txt'))
    .flatMap((f) => parseExposition(readFileSync(join(fixtures, f), 'utf8'), `test/fixtures/metrics/${f}`));
}

/** Series name → its family. */
function exported(families: Family[]): Map<string, Family> {
  const out = new Map<string, Family>();
  for (const f of families) for (const s of seriesOf(f)) out.set(s, f);
  return out;
}

interface Target {
  expr: string;
  refId?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  name: string;
  type: string;
  query?: string | { query: string };
  datasource?: { type?: string; uid?: string };
}
interface Dashboard {
  schemaVersion: number;
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}

const dashboard = (): Dashboard => JSON.parse(readFileSync(dashboardPath, 'utf8')) as Dashboard;

function allPanels(d: Dashboard): Panel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Each query of the dashboard, where it is (panel title or variable), and whether it only lists series. */
function queries(d: Dashboard): { where: string; expr: string; lists?: boolean }[] {
  const out: { where: string; expr: string; lists?: boolean }[] = [];
  for (const p of allPanels(d)) for (const t of p.targets ?? []) out.push({ where: p.title, expr: t.expr });
  for (const v of d.templating.list) {
    if (v.type !== 'query' || v.query === undefined) continue;
    const q = typeof v.query === 'string' ? v.query : v.query.query;
    // label_values(METRIC, label) is Grafana's, not PromQL: the metric is its first argument.
    const lv = /^label_values\(\s*([^,]+),\s*\w+\s*\)$/.exec(q);
    out.push({ where: `variable ${v.name}`, expr: lv?.[1] ?? q, lists: lv !== null });
  }
  return out;
}

/**
 * Labels Prometheus adds when it scrapes: `instance` and `job` to every series, and `model`
 * to llama.cpp's, which carry none (the scrape config in docs/grafana.md sets it).
 */
function targetLabels(series: string): string[] {
  return series.startsWith('llamacpp:') ? ['instance', 'job', 'model'] : ['instance', 'job'];
}

/**
 * What a query names that nothing exports, counters read without a range, and label matchers
 * on labels a series lacks or values it never has.
 */
function problems(d: Dashboard, series: Map<string, Family>, allowed: Set<string>): string[] {
  const out: string[] = [];
  for (const q of queries(d)) {
    for (const use of namesIn(q.expr)) {
      const family = series.get(use.name);
      if (family === undefined) {
        if (!allowed.has(use.name))
          out.push(`${q.where}: ${use.name} is exported by neither llmgw nor an engine`);
        continue;
      }
      if ((family.type === 'counter' || family.type === 'histogram') && !use.range && q.lists !== true)
        out.push(`${q.where}: ${use.name} is a ${family.type}'s series, read without rate() over a range`);
      for (const m of use.matchers) {
        const values = family.labels.get(m.label);
        if (values === undefined && !targetLabels(use.name).includes(m.label))
          out.push(
            `${q.where}: ${use.name} has no label ${m.label} (it has ${[...family.labels.keys()].join(', ')})`,
          );
        // A literal value must be one the exporter gives (the gateway's kinds, replica states).
        else if (values !== undefined && m.op === '=' && !m.value.includes('$') && !values.has(m.value))
          out.push(
            `${q.where}: ${use.name}'s ${m.label} is never "${m.value}" (it is ${[...values].join(', ')})`,
          );
      }
    }
  }
  return out;
}

/** Label matchers, whose regular expressions may hold brackets. */
const matchers = /\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\}/g;

const pendingSeries = new Set(pending.flatMap((p) => seriesOf(p)));

describe('namesIn: a PromQL expression’s series names', () => {
  it.each<[string, string, string[]]>([
    ['a bare name', 'up', ['up']],
    ['names with colons', 'vllm:num_requests_running{model_name="a"}', ['vllm:num_requests_running']],
    [
      'a quantile over buckets: le and model are labels, functions are not names',
      'histogram_quantile(0.9, sum by (le, model) (rate(x_bucket{model=~"$model"}[$__rate_interval])))',
      ['x_bucket'],
    ],
    ['by after the arguments', 'sum(rate(a_total[5m])) by (code)', ['a_total']],
    ['without', 'sum without (instance) (b)', ['b']],
    [
      'binary operators with on and group_left',
      'a / on (job) group_left (version) b * ignoring (x) c',
      ['a', 'b', 'c'],
    ],
    ['and, or, unless, bool', 'a and b or c unless d > bool 1', ['a', 'b', 'c', 'd']],
    [
      'offset and a duration',
      'rate(a_total[1h30m] offset 5m) - rate(b_total[5m] offset -1d)',
      ['a_total', 'b_total'],
    ],
    [
      'strings, with quotes and braces inside',
      'a{x="}\\"by(", y=\'{\'} + label_replace(b, "d", "$1", "s", "(.*)")',
      ['a', 'b'],
    ],
    ['numbers and scientific notation', 'clamp_min(a, 1e-9) + 0x1f + .5 * 2', ['a']],
    ['Grafana variables', 'a[$__rate_interval] + ${var} + $other', ['a']],
    ['a subquery', 'max_over_time(rate(a_total[1m])[10m:1m])', ['a_total']],
    ['@ modifiers', 'a @ 1609746000 + b @ start()', ['a', 'b']],
    ['comments', 'a # b c\n+ d', ['a', 'd']],
    ['Inf and NaN', 'a > Inf or b != NaN', ['a', 'b']],
  ])('%s', (_, expr, names) => {
    expect(namesIn(expr).map((u) => u.name)).toEqual(names);
  });

  it('says which names are read over a range, and with which label matchers', () => {
    expect(namesIn('rate(a_total{x="y", z=~"$v|w"} [5m]) / b{q!="\\"}",r!~\'s\',}')).toEqual([
      {
        name: 'a_total',
        matchers: [
          { label: 'x', op: '=', value: 'y' },
          { label: 'z', op: '=~', value: '$v|w' },
        ],
        range: true,
      },
      {
        name: 'b',
        matchers: [
          { label: 'q', op: '!=', value: '"}' },
          { label: 'r', op: '!~', value: 's' },
        ],
        range: false,
      },
    ]);
  });

  it('refuses what it cannot read rather than guessing', () => {
    expect(() => namesIn('a{x="y}')).toThrow('unterminated string in: a{x="y}');
    expect(() => namesIn('sum(rate(a[5m])')).not.toThrow();
    expect(() => namesIn('a{x="y"')).toThrow('unbalanced { in: a{x="y"');
    expect(() => namesIn('a{x}')).toThrow('not a label matcher at 3 in: a{x}');
    expect(() => namesIn('a{x=y}')).toThrow('a label matcher without a string at 4 in: a{x=y}');
    expect(() => namesIn('{__name__="a"}')).toThrow('a selector without a metric name in: {__name__="a"}');
  });
});

describe('parseExposition: an exporter’s /metrics text', () => {
  it('reads families, their types and their label values', () => {
    const text =
      '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 3\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_sum 0.5\nh_count 1\n';
    expect(parseExposition(text, 't')).toEqual([
      { name: 'a_total', type: 'counter', source: 't', labels: new Map([['x', new Set(['1'])]]) },
      { name: 'h', type: 'histogram', source: 't', labels: new Map([['le', new Set(['+Inf'])]]) },
    ]);
  });

  it.each([
    ['a sample without a TYPE line', 'b 1\n', 't:1: b has no # TYPE line before it'],
    ['a value that is not a number', '# TYPE b gauge\nb one\n', "t:2: b's value one is not a number"],
    [
      'a line that is no sample',
      '# TYPE b gauge\nHTTP/1.1 200 OK\n',
      't:2: not a Prometheus sample line: HTTP/1.1 200 OK',
    ],
    ['an unknown type', '# TYPE b meter\n', 't:1: unknown metric type meter'],
  ])('refuses %s', (_, text, message) => {
    expect(() => parseExposition(text, 't')).toThrow(message);
  });
});

describe('deploy/grafana/llmgw.json', () => {
  it('reads only series that llmgw or the engines export, counters over a range', async () => {
    const series = exported([...(await llmgwFamilies()), ...engineFamilies()]);
    expect(problems(dashboard(), series, pendingSeries)).toEqual([]);
  });

  it('names series of the gateway and of every engine with Prometheus /metrics', async () => {
    const series = exported([...(await llmgwFamilies()), ...engineFamilies()]);
    const used = queries(dashboard()).flatMap((q) => namesIn(q.expr).map((u) => u.name));
    for (const prefix of ['llmgw_gateway_', 'vllm:', 'sglang:', 'llamacpp:'])
      expect(
        used.filter((n) => n.startsWith(prefix) && series.has(n)).length,
        `no exported ${prefix} series`,
      ).toBeGreaterThan(0);
  });

  it('catches a misspelt metric, a histogram read without its buckets, a counter read raw, a wrong label and value', async () => {
    const series = exported([...(await llmgwFamilies()), ...engineFamilies()]);
    const d = dashboard();
    const [first] = allPanels(d).filter((p) => (p.targets ?? []).length > 0);
    if (first === undefined) throw new Error('the dashboard has no queries');
    first.targets = [
      { refId: 'A', expr: 'sum by (model) (rate(llmgw_gateway_request_total[$__rate_interval]))' },
      { refId: 'B', expr: 'vllm:num_request_running' },
      { refId: 'C', expr: 'histogram_quantile(0.9, rate(llmgw_gateway_time_to_first_token_seconds[5m]))' },
      { refId: 'D', expr: 'sum(llmgw_gateway_tokens_total)' },
      { refId: 'E', expr: 'vllm:num_requests_running{model=~"$model"}' },
      { refId: 'F', expr: 'llmgw_gateway_replica_load{kind="runing"}' },
    ];
    expect(problems(d, series, pendingSeries)).toEqual([
      `${first.title}: llmgw_gateway_request_total is exported by neither llmgw nor an engine`,
      `${first.title}: vllm:num_request_running is exported by neither llmgw nor an engine`,
      `${first.title}: llmgw_gateway_time_to_first_token_seconds is exported by neither llmgw nor an engine`,
      `${first.title}: llmgw_gateway_tokens_total is a counter's series, read without rate() over a range`,
      `${first.title}: vllm:num_requests_running has no label model (it has model_name, engine)`,
      `${first.title}: llmgw_gateway_replica_load's kind is never "runing" (it is in_flight, score, running, waiting, kv_usage)`,
    ]);
  });

  it('lists as pending only what its queries name', () => {
    const used = new Set(queries(dashboard()).flatMap((q) => namesIn(q.expr).map((u) => u.name)));
    for (const p of pending) {
      expect(
        seriesOf(p).some((s) => used.has(s)),
        `${p.name} is pending but the dashboard does not use it: remove it from pending`,
      ).toBe(true);
    }
  });

  // Each fails while its exporter is not on main; once its registry is listed in
  // `registries`, this test fails: then remove the entry from `pending`.
  for (const p of pending)
    it.fails(
      `${p.name} (${p.type}) is exported (by ${p.by}): remove it from pending once it is`,
      async () => {
        const series = exported(await llmgwFamilies());
        expect(seriesOf(p).every((s) => series.get(s)?.type === p.type)).toBe(true);
      },
    );

  it('gives every panel a Prometheus datasource from the variable, and every query one', () => {
    for (const p of allPanels(dashboard())) {
      if (p.type === 'row') continue;
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect((p.targets ?? []).length, `${p.title} has no query`).toBeGreaterThan(0);
      for (const t of p.targets ?? []) {
        expect(t.datasource, `${p.title} ${t.refId ?? ''}`).toEqual({
          type: 'prometheus',
          uid: '${datasource}',
        });
        expect(t.expr.trim(), `${p.title} ${t.refId ?? ''} has an empty expr`).not.toBe('');
      }
      const refIds = (p.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, `${p.title}: refIds repeat`).toBe(refIds.length);
    }
  });

  it('has unique panel ids and a grid where panels fit and do not overlap', () => {
    const panels = allPanels(dashboard());
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { title, gridPos: g } of panels) {
      for (const v of [g.h, g.w, g.x, g.y]) expect(Number.isInteger(v), title).toBe(true);
      expect(
        g.w >= 1 && g.h >= 1 && g.x >= 0 && g.y >= 0 && g.x + g.w <= 24,
        `${title}: ${JSON.stringify(g)}`,
      ).toBe(true);
    }
    for (const [i, a] of panels.entries())
      for (const b of panels.slice(i + 1)) {
        const apart =
          a.gridPos.x + a.gridPos.w <= b.gridPos.x ||
          b.gridPos.x + b.gridPos.w <= a.gridPos.x ||
          a.gridPos.y + a.gridPos.h <= b.gridPos.y ||
          b.gridPos.y + b.gridPos.h <= a.gridPos.y;
        expect(apart, `${a.title} overlaps ${b.title}`).toBe(true);
      }
  });

  it('is a current Grafana dashboard with a datasource and a model variable', () => {
    const d = dashboard();
    expect(d.schemaVersion).toBeGreaterThanOrEqual(39);
    expect(d.uid).toBe('llmgw-overview');
    const [ds, model] = d.templating.list;
    expect(ds).toMatchObject({ name: 'datasource', type: 'datasource', query: 'prometheus' });
    expect(model).toMatchObject({
      name: 'model',
      type: 'query',
      datasource: { type: 'prometheus', uid: '${datasource}' },
      query: { query: 'label_values(llmgw_gateway_requests_total, model)' },
    });
  });

  it('reads rates over $__rate_interval and quantiles from buckets summed by le', () => {
    for (const q of queries(dashboard())) {
      for (const range of q.expr.replace(matchers, '{}').match(/\[[^\]]*\]/g) ?? [])
        expect(range, `${q.where}: ${q.expr}`).toBe('[$__rate_interval]');
      for (const hq of q.expr.matchAll(/histogram_quantile\(\s*([^,]+),\s*(\w+)(?:\s+by\s*\(([^)]*)\))?/g)) {
        const [, phi = '', aggregation, by = ''] = hq;
        expect(Number(phi) > 0 && Number(phi) < 1, `${q.where}: quantile ${phi}`).toBe(true);
        expect(aggregation, `${q.where}: ${q.expr}`).toBe('sum');
        expect(
          by.split(',').map((l) => l.trim()),
          `${q.where}: ${q.expr}`,
        ).toContain('le');
      }
    }
  });
});
