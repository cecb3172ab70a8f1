import { z } from 'zod';

import { didYouMean } from '../core/did-you-mean.js';

import { parseYamlText, yamlValue } from './yaml-error.js';

/** LLMGW_ variables that are not settings keys, so not typos of one. */
const otherVariables = new Set([
  'LLMGW_CONFIG',
  'LLMGW_ADMIN_KEY',
  'LLMGW_ENGINE_KEY_SECRET',
  'LLMGW_SERVER',
  'LLMGW_KEY',
  'LLMGW_TOKEN',
  'LLMGW_NVML_LIBRARY',
  'LLMGW_NVIDIA_SMI',
  'LLMGW_LOG_LEVEL',
  'LLMGW_LOG_FORMAT',
  'LLMGW_CTL_CONFIG',
]);

export interface EnvKey {
  path: string[];
  variable: string;
  schema: z.ZodType;
}

/** Every leaf key of the settings, with the environment variable that sets it. */
export function envKeys(schema: z.ZodType, prefix: string[] = []): EnvKey[] {
  const s = unwrap(schema);
  if (s instanceof z.ZodObject) {
    return Object.entries(s.shape as Record<string, z.ZodType>).flatMap(([k, v]) =>
      envKeys(v, [...prefix, k]),
    );
  }
  return [{ path: prefix, variable: `LLMGW_${prefix.join('_').toUpperCase()}`, schema: s }];
}

function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    if (s instanceof z.ZodOptional || s instanceof z.ZodDefault || s instanceof z.ZodPrefault)
      s = s.unwrap() as z.ZodType;
    else return s;
  }
}

/** A variable's text as the type its key takes; what does not parse is left for the schema to refuse. */
export function parseEnvValue(text: string, schema: z.ZodType): unknown {
  const s = unwrap(schema);
  if (s instanceof z.ZodNumber) {
    const n = Number(text.trim());
    return text.trim() !== '' && Number.isFinite(n) ? n : text;
  }
  if (s instanceof z.ZodBoolean) {
    if (/^(true|1|yes)$/i.test(text.trim())) return true;
    if (/^(false|0|no)$/i.test(text.trim())) return false;
    return text;
  }
  if (s instanceof z.ZodArray || s instanceof z.ZodObject || s instanceof z.ZodRecord) {
    const { doc, errors } = parseYamlText(text);
    return errors.length > 0 ? text : yamlValue(doc);
  }
  return text;
}

/** LLMGW_ variables that set nothing, each with the variable it was probably meant to be. */
export function unknownVariables(env: NodeJS.ProcessEnv, keys: readonly EnvKey[]): string[] {
  const known = keys.map((k) => k.variable);
  const out: string[] = [];
  for (const name of Object.keys(env)) {
    if (!name.startsWith('LLMGW_') || otherVariables.has(name) || known.includes(name)) continue;
    const guess = didYouMean(name, [...known, ...otherVariables]);
    out.push(
      `environment variable ${name} sets nothing${guess === undefined ? '' : `; did you mean ${guess}?`}`,
    );
  }
  return out;
}
