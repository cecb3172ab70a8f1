import { z } from 'zod';

import { contextSchema, MAX_CONTEXT } from './context-bounds.js';

/**
 * The shape of a model in the catalog, as written in `models:` of the settings file,
 * in `llmgw ctl model add -f FILE` and in the API. Cross-field rules (what each engine
 * accepts) are in rules.ts; this file holds what each key is on its own.
 */

/**
 * An engine's name, as `engine:` says it: one of the engines validateModel is given (the
 * registry's, src/engines/registry.ts). The catalog sits below the engines and names none.
 */
export type EngineName = string;

export const runtimeNames = ['process', 'container'] as const;
export type RuntimeName = (typeof runtimeNames)[number];

const count = () => z.int().min(1);

export const adapterSchema = z.strictObject({
  name: z.string().min(1),
  path: z.string().min(1),
});

const profileSchemaWith = (engine: z.ZodType<string>) =>
  z.strictObject({
    name: z.string().min(1),
    engine,
    gpu_class: z.string().min(1).optional(),
    cpu: z.boolean().optional(),
    tp: count().optional(),
    pp: count().optional(),
    // 0 is what a CPU profile reads back as; a GPU profile is refused it in rules.ts.
    gpus_per_node: z.int().min(0).optional(),
    nodes: count().optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    served_model_name: z.string().min(1).optional(),
    adapters: z.array(adapterSchema).default([]),
    min_memory_gb: z.number().nonnegative().optional(),
    /** How the agent runs the engine: a host process, or the engine's image as a container (docs/containers.md). */
    runtime: z
      .enum(runtimeNames, {
        error: 'how the engine runs: runtime: process (the default) or runtime: container',
      })
      .optional(),
    /** The container image (only with runtime: container); unset, the engine's default image. Checked in rules.ts. */
    image: z.string({ error: 'a container image, e.g. image: vllm/vllm-openai:v0.21.0' }).optional(),
  });

/** A profile's keys, its engine any name (modelSchemaFor checks it against the engines). */
export const profileSchema = profileSchemaWith(z.string().min(1));

/**
 * Replicas that follow load (Knative/KEDA-style): between min and max, aiming at `target`, the
 * share of each replica's slots busy (0.7: 70%). `idle_s`: with min 0, how long without a
 * request before the last replica stops. Bounds across keys are checked in rules.ts.
 */
export const autoscaleSchema = z.strictObject({
  min: z.int({ error: 'a whole number of replicas, e.g. min: 0' }).min(0, 'at least 0 replicas'),
  max: z.int({ error: 'a whole number of replicas, e.g. max: 4' }).min(1, 'at least 1 replica').max(10_000),
  target: z
    .number({ error: 'the load per replica to aim at, e.g. target: 0.7 (70% of its slots busy)' })
    .gt(0, 'more than 0, e.g. target: 0.7 (70% of its slots busy)')
    .max(1, 'at most 1 (every slot busy), e.g. target: 0.7')
    .default(0.7),
  idle_s: z
    .int({ error: 'a whole number of seconds, e.g. idle_s: 300' })
    .min(1, 'at least 1 s, e.g. idle_s: 300')
    .max(604_800, 'at most 604800 s (a week)')
    .default(300),
});

const modelSchemaWith = (profile: typeof profileSchema) =>
  z.strictObject({
    name: z.string().min(1),
    source: z.string().min(1),
    context_length: contextSchema().optional(),
    // No answer is longer than the longest context.
    max_output: z.int().min(1).max(MAX_CONTEXT).optional(),
    replicas: z.int().min(0).max(10_000).default(1),
    autoscale: autoscaleSchema.optional(),
    profiles: z
      .array(profile)
      .min(1, { error: 'a model needs at least one profile (where and how it runs)' }),
  });

/** A model's keys, its profiles' engines any name: what validateModel parses with is modelSchemaFor's. */
export const modelSchema = modelSchemaWith(profileSchema);

const schemas = new Map<string, typeof modelSchema>();

/** The model's schema with `engine:` one of these names (zod's own "expected one of" when not). */
export function modelSchemaFor(names: readonly string[]): typeof modelSchema {
  const key = names.join('\u0000');
  let schema = schemas.get(key);
  if (schema === undefined) {
    const engine = z.enum(names as [string, ...string[]]);
    schema = modelSchemaWith(profileSchemaWith(engine));
    schemas.set(key, schema);
  }
  return schema;
}

export type AutoscaleSpec = z.output<typeof autoscaleSchema>;
export type AdapterSpec = z.output<typeof adapterSchema>;
export type ProfileInput = z.input<typeof profileSchema>;
export type ModelInput = z.input<typeof modelSchema>;

/** A profile after validation, with every default filled in. */
export interface ProfileSpec {
  name: string;
  engine: EngineName;
  gpu_class?: string;
  cpu?: boolean;
  tp: number;
  pp: number;
  gpus_per_node: number;
  nodes: number;
  args: string[];
  env: Record<string, string>;
  served_model_name?: string;
  adapters: AdapterSpec[];
  min_memory_gb?: number;
  /** Set only to `container` (a process is the default, and reads back without the key). */
  runtime?: 'container';
  /** With runtime container: the image, when not the engine's default. */
  image?: string;
}

/** A model after validation, with every default filled in. */
export interface ModelSpec {
  name: string;
  source: string;
  context_length?: number;
  max_output?: number;
  /** With autoscale: the count it starts at, held within [min, max]. */
  replicas: number;
  autoscale?: AutoscaleSpec;
  profiles: ProfileSpec[];
}

/** Whether a profile runs on CPUs (no GPU at all). */
export function isCpuProfile(p: Pick<ProfileSpec, 'cpu'>): boolean {
  return p.cpu === true;
}

/** Whether a profile's engine runs as a container rather than a host process. */
export function isContainerProfile(p: Pick<ProfileSpec, 'runtime'>): boolean {
  return p.runtime === 'container';
}

/** How many cards one replica of a profile takes, over all its nodes. */
export function cardsPerReplica(p: ProfileSpec): number {
  if (isCpuProfile(p)) return 0;
  return p.gpus_per_node * p.nodes;
}
