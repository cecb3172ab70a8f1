import { z } from 'zod';

import { didYouMeanSuffix } from './did-you-mean.js';
import type { Issue } from './errors.js';

/**
 * Turns zod's issues into llmgw's: each one says where, what was expected and, for a
 * misspelt key or enum value, the likely intended word. Messages are written for the
 * person editing a YAML file, not for a TypeScript programmer.
 */
export function issuesFromZod(schema: z.ZodType, error: z.ZodError): Issue[] {
  const out: Issue[] = [];
  for (const issue of error.issues) out.push(...convert(schema, issue));
  return out;
}

/** zod's own English messages start so; anything else was written for this schema and is kept. */
const defaultMessage = /^(Invalid|Too small|Too big|Unrecognized)/;

function convert(root: z.ZodType, issue: z.core.$ZodIssue): Issue[] {
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  if (
    issue.code !== 'unrecognized_keys' &&
    issue.code !== 'invalid_union' &&
    !defaultMessage.test(issue.message)
  ) {
    return [{ path, message: issue.message }];
  }
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = objectKeysAt(root, path);
      return issue.keys.map((key) => ({
        path: [...path, key],
        message: `unknown key "${key}"${didYouMeanSuffix(key, known)}${known.length > 0 ? ` (known keys: ${known.join(', ')})` : ''}`,
      }));
    }
    case 'invalid_type': {
      if (issue.input === undefined)
        return [{ path, message: `is required (${describeExpected(issue.expected)})` }];
      return [
        { path, message: `expected ${describeExpected(issue.expected)}, got ${describe(issue.input)}` },
      ];
    }
    case 'invalid_value': {
      const values = issue.values.map((v) => JSON.stringify(v));
      const input = issue.input;
      const suffix = typeof input === 'string' ? didYouMeanSuffix(input, issue.values.map(String)) : '';
      return [
        {
          path,
          message: `expected ${values.length === 1 ? values[0] : `one of ${values.join(', ')}`}, got ${describe(input)}${suffix}`,
        },
      ];
    }
    case 'too_small': {
      const what = issue.origin === 'array' ? 'items' : issue.origin === 'string' ? 'characters' : '';
      const bound = `${issue.inclusive === false ? 'more than' : 'at least'} ${String(issue.minimum)}${what ? ` ${what}` : ''}`;
      return [{ path, message: `must be ${bound}${gotScalar(issue.input)}` }];
    }
    case 'too_big': {
      const what = issue.origin === 'array' ? 'items' : issue.origin === 'string' ? 'characters' : '';
      const bound = `${issue.inclusive === false ? 'less than' : 'at most'} ${String(issue.maximum)}${what ? ` ${what}` : ''}`;
      return [{ path, message: `must be ${bound}${gotScalar(issue.input)}` }];
    }
    case 'invalid_union': {
      // Report the branch that got furthest: the one with the fewest issues.
      const branches = issue.errors.filter((b) => b.length > 0);
      const best = branches.sort((a, b) => a.length - b.length)[0];
      if (best === undefined) return [{ path, message: issue.message }];
      return best.flatMap((sub) => convert(root, { ...sub, path: [...issue.path, ...sub.path] }));
    }
    case 'invalid_key':
    case 'invalid_element':
      return issue.issues.flatMap((sub) => convert(root, { ...sub, path: [...issue.path, ...sub.path] }));
    default:
      return [{ path, message: issue.message }];
  }
}

function describeExpected(expected: string): string {
  switch (expected) {
    case 'int':
      return 'a whole number';
    case 'number':
      return 'a number';
    case 'string':
      return 'a string';
    case 'boolean':
      return 'true or false';
    case 'array':
      return 'a list';
    case 'object':
    case 'record':
      return 'a mapping of keys to values';
    default:
      return expected;
  }
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string')
    return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : typeof value;
}

/** The keys an object schema accepts at a path, for did-you-mean on a misspelt key. */
export function objectKeysAt(schema: z.ZodType, path: readonly (string | number)[]): string[] {
  let current: z.ZodType | undefined = schema;
  for (const part of path) {
    current = current === undefined ? undefined : childSchema(unwrap(current), part);
  }
  if (current === undefined) return [];
  const obj = unwrap(current);
  return obj instanceof z.ZodObject ? Object.keys(obj.shape) : [];
}

function unwrap(schema: z.ZodType): z.ZodType {
  let s: z.ZodType = schema;
  for (;;) {
    if (s instanceof z.ZodOptional || s instanceof z.ZodNullable) s = s.unwrap() as z.ZodType;
    else if (s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
    else if (s instanceof z.ZodPipe) s = s.in as z.ZodType;
    else if (s instanceof z.ZodCatch) s = s.unwrap() as z.ZodType;
    else return s;
  }
}

function childSchema(schema: z.ZodType, part: string | number): z.ZodType | undefined {
  if (schema instanceof z.ZodObject && typeof part === 'string') {
    const shape = schema.shape as Record<string, z.ZodType | undefined>;
    return shape[part];
  }
  if (schema instanceof z.ZodArray && typeof part === 'number') return schema.element as z.ZodType;
  if (schema instanceof z.ZodRecord) return schema.valueType as z.ZodType;
  return undefined;
}

function gotScalar(input: unknown): string {
  return typeof input === 'number' || typeof input === 'string' ? `, got ${describe(input)}` : '';
}
