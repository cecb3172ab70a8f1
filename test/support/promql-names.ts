/**
 * What a dashboard's PromQL names, and what an exporter's /metrics offers: enough of both
 * languages to check that every query reads a series that exists (test/grafana-dashboard.test.ts).
 */

/** A label matcher of a selector: `model=~"$model"`. */
export interface Matcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

/**
 * A series name a query selects, its label matchers, and whether it is read over a range
 * (`[…]`, for rate/increase).
 */
export interface NameUse {
  name: string;
  matchers: Matcher[];
  range: boolean;
}

/** Words that are never series names: binary operators, modifiers, and PromQL's literals. */
const keywords = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'and',
  'or',
  'unless',
  'atan2',
  'inf',
  'nan',
]);
/** Keywords followed by a list of label names in parentheses. */
const labelLists = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const identStart = /[a-zA-Z_:]/;
const identPart = /[a-zA-Z0-9_:]/;

/**
 * The series names an expression selects, in order, each once per use. Skipped: functions and
 * aggregations (a name followed by `(` or by `by`/`without`), keywords, label names (inside
 * `{…}` and in `by (…)` and its kin), string literals, numbers and durations, ranges
 * (`[…]`), comments and Grafana's `$variables`.
 */
export function namesIn(expr: string): NameUse[] {
  const out: NameUse[] = [];
  let i = 0;
  const at = (k: number): string => expr.charAt(k);
  const space = (): void => {
    while (i < expr.length && /\s/.test(at(i))) i++;
  };
  const word = (): string => {
    const start = i;
    while (i < expr.length && identPart.test(at(i))) i++;
    return expr.slice(start, i);
  };
  /** Past a string literal; its text, escapes undone. */
  const string = (): string => {
    const quote = at(i++);
    let text = '';
    while (i < expr.length && at(i) !== quote) {
      if (at(i) === '\\' && quote !== '`') i++;
      text += at(i++);
    }
    if (i >= expr.length) throw new Error(`unterminated string in: ${expr}`);
    i++;
    return text;
  };
  /** `{label op "value", …}`, from its opening brace past its closing one. */
  const matchers = (): Matcher[] => {
    const out: Matcher[] = [];
    i++;
    for (;;) {
      space();
      if (at(i) === '}') break;
      const label = word();
      space();
      const op = ['=~', '!~', '!=', '='].find((o) => expr.startsWith(o, i));
      if (label === '' || op === undefined) throw new Error(`not a label matcher at ${i} in: ${expr}`);
      i += op.length;
      space();
      if (!['"', "'", '`'].includes(at(i)))
        throw new Error(`a label matcher without a string at ${i} in: ${expr}`);
      out.push({ label, op: op as Matcher['op'], value: string() });
      space();
      if (at(i) === ',') i++;
      else if (at(i) !== '}') throw new Error(`unbalanced { in: ${expr}`);
    }
    i++;
    return out;
  };
  /** From an opening bracket past its closing one, strings inside included. */
  const balanced = (): void => {
    const open = at(i);
    const close = ({ '(': ')', '{': '}', '[': ']' } as Record<string, string>)[open];
    if (close === undefined) throw new Error(`no bracket at ${i} in: ${expr}`);
    let depth = 0;
    while (i < expr.length) {
      const c = at(i);
      if (c === '"' || c === "'" || c === '`') {
        string();
        continue;
      }
      if (c === open) depth++;
      else if (c === close && --depth === 0) {
        i++;
        return;
      }
      i++;
    }
    throw new Error(`unbalanced ${open} in: ${expr}`);
  };
  while (i < expr.length) {
    const c = at(i);
    if (/\s/.test(c)) i++;
    else if (c === '#') while (i < expr.length && at(i) !== '\n') i++;
    else if (c === '"' || c === "'" || c === '`') string();
    else if (c === '{')
      // Checked only through a metric name: a selector by labels alone would go unchecked.
      throw new Error(`a selector without a metric name in: ${expr}`);
    else if (c === '[') balanced();
    else if (c === '$') {
      i++;
      if (at(i) === '{') balanced();
      else word();
    } else if (/[0-9.]/.test(c)) {
      // Numbers (1e-9, 0x1f) and durations (5m, 1h30m).
      while (i < expr.length && /[0-9a-zA-Z.]/.test(at(i)))
        i += /[eE]/.test(at(i)) && /[+-]/.test(at(i + 1)) ? 2 : 1;
    } else if (identStart.test(c)) {
      const name = word();
      const lower = name.toLowerCase();
      space();
      if (labelLists.has(lower)) {
        if (at(i) === '(') balanced();
      } else if (lower === 'offset') {
        if (at(i) === '-') i++;
        if (at(i) === '$') i++;
        while (i < expr.length && /[0-9a-zA-Z_.]/.test(at(i))) i++;
      } else if (keywords.has(lower) || at(i) === '(') {
        // A keyword, or a function or aggregation whose arguments are read on.
      } else {
        const save = i;
        const next = word().toLowerCase();
        i = save;
        // `sum by (…) (…)`: an aggregation whose clause comes first.
        if (next === 'by' || next === 'without') continue;
        let labels: Matcher[] = [];
        if (at(i) === '{') {
          labels = matchers();
          space();
        }
        out.push({ name, matchers: labels, range: at(i) === '[' });
      }
    } else i++;
  }
  return out;
}

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** A metric family as an exporter declares it, and the label values its samples carry. */
export interface Family {
  name: string;
  type: MetricType;
  source: string;
  labels: Map<string, Set<string>>;
}

/** Adds a sample's labels to its family's. */
export function addLabels(f: Family, labels: Partial<Record<string, string | number>>): void {
  for (const [k, v] of Object.entries(labels)) {
    if (v === undefined) continue;
    let values = f.labels.get(k);
    if (values === undefined) f.labels.set(k, (values = new Set()));
    values.add(String(v));
  }
}

/** The series names a family's samples carry (a histogram's `_bucket`, `_sum`, `_count`). */
export function seriesOf(f: Pick<Family, 'name' | 'type'>): string[] {
  if (f.type === 'histogram') return [`${f.name}_bucket`, `${f.name}_sum`, `${f.name}_count`];
  if (f.type === 'summary') return [f.name, `${f.name}_sum`, `${f.name}_count`];
  return [f.name];
}

const types = new Set<unknown>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/**
 * A type as an exporter names it. prom-client's typings say an enum of numbers, but its
 * registry reports the strings of the text format (`'counter'`), which are checked here.
 */
export function metricType(value: unknown, where: string): MetricType {
  if (!types.has(value)) throw new Error(`${where}: unknown metric type ${String(value)}`);
  return value as MetricType;
}
const sampleLine = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?[ \t]+(\S+)([ \t]+-?\d+)?$/;

/**
 * The families of a Prometheus text exposition (format 0.0.4), read strictly: a line that is
 * not a comment, a blank or a sample of a declared family is an error, so a fixture that is
 * not what an engine prints cannot pass for one.
 */
export function parseExposition(text: string, source: string): Family[] {
  const families = new Map<string, Family>();
  const lines = text.split('\n');
  lines.forEach((line, n) => {
    const where = `${source}:${n + 1}`;
    if (line.trim() === '' || line.startsWith('# HELP ')) return;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\S+)$/.exec(line);
    if (type !== null) {
      const [, name = '', kind = ''] = type;
      families.set(name, { name, type: metricType(kind, where), source, labels: new Map() });
      return;
    }
    if (line.startsWith('#')) return;
    const sample = sampleLine.exec(line);
    if (sample === null) throw new Error(`${where}: not a Prometheus sample line: ${line}`);
    const [, name = '', labels = '', value = ''] = sample;
    if (Number.isNaN(Number(value)) && !['+Inf', '-Inf', 'NaN'].includes(value))
      throw new Error(`${where}: ${name}'s value ${value} is not a number`);
    const family = [...families.values()].find((f) => seriesOf(f).includes(name));
    if (family === undefined) throw new Error(`${where}: ${name} has no # TYPE line before it`);
    const pairs: Record<string, string> = {};
    for (const [, k = '', v = ''] of labels.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      pairs[k] = v;
    addLabels(family, pairs);
  });
  return [...families.values()];
}
