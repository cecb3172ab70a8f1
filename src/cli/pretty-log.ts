import { prettyFactory } from 'pino-pretty';

/** Said by the line's own columns (time, level, component, message), so not repeated as fields. */
const columns = new Set(['time', 'level', 'component', 'msg', 'pid', 'hostname']);

/** `key=value` words for a log line's fields: nested objects flattened (`a.b=1`), lists joined by commas. */
export function fieldWords(log: Record<string, unknown>): { words: string[]; blocks: string[] } {
  const words: string[] = [];
  const blocks: string[] = [];
  const add = (key: string, value: unknown): void => {
    if (value === undefined) return;
    if (typeof value === 'string' && value.includes('\n')) {
      // A stack trace: its first line here, the rest indented below the line.
      const [first = '', ...rest] = value.split('\n');
      words.push(`${key}=${word(first)}`);
      blocks.push(...rest.map((l) => `    ${visible(l.trim())}`));
    } else if (Array.isArray(value) && value.every((v) => v === null || typeof v !== 'object'))
      words.push(`${key}=${value.map((v) => word(String(v))).join(',')}`);
    else if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) add(`${key}.${k}`, v);
    } else words.push(`${key}=${typeof value === 'string' ? word(value) : JSON.stringify(value)}`);
  };
  for (const [k, v] of Object.entries(log)) if (!columns.has(k)) add(k, v);
  return { words, blocks };
}

/** A value as one word: bare when it has no space, quote, equals sign or control character; quoted (JSON) otherwise. */
function word(s: string): string {
  return s !== '' && /^[^\s"=\p{Cc}]+$/u.test(s) ? s : JSON.stringify(s);
}

/** Control characters written as escapes: text a client sent must not steer the terminal. */
export function visible(s: string): string {
  return s.replace(/\p{Cc}/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * Turns pino's JSON lines into short lines for a person at a terminal:
 * `00:04:12 INFO  llmgw-up: control plane listening  url=http://127.0.0.1:8080 store=sqlite`.
 * It formats what pino wrote, so the redaction pino applied holds in this format too.
 */
export function prettyLines(o: { colorize: boolean }): (line: string) => string {
  return prettyFactory({
    colorize: o.colorize,
    // Local time of day: a person at a terminal knows the date.
    translateTime: 'SYS:HH:MM:ss',
    hideObject: true,
    customPrettifiers: {
      time: (t) => (typeof t === 'string' ? t : ''),
      // The level, padded so messages line up, and then the component.
      level: (level, _key, log, extras) => {
        const { labelColorized, colors } = extras;
        // pino writes the level's name (see logger.ts), which is the label.
        const label = typeof level === 'string' ? level.toUpperCase() : '';
        const component = (log as Record<string, unknown>)['component'];
        const name = typeof component === 'string' ? ` ${colors.bold(component)}` : '';
        return `${labelColorized}${' '.repeat(Math.max(0, 5 - label.length))}${name}`;
      },
    },
    messageFormat: (log, messageKey, _levelLabel, { colors }) => {
      const msg = log[messageKey];
      const { words, blocks } = fieldWords(log);
      const fields = words.map((w) => {
        const at = w.indexOf('=');
        return `${colors.gray(w.slice(0, at + 1))}${w.slice(at + 1)}`;
      });
      const head = [
        typeof msg === 'string' ? visible(msg) : '',
        ...(fields.length === 0 ? [] : [fields.join(' ')]),
      ]
        .filter((s) => s !== '')
        .join('  ');
      return [head, ...blocks].join('\n');
    },
  });
}
