import { z } from 'zod';

/**
 * The settings file, key by key. Later parts add their own sections here; every key is
 * also settable from the environment as LLMGW_ + its path in upper snake case.
 */

const listenPattern = /^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(\d{1,5})$/;

const listenMessage = 'expected HOST:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:8080 (every interface) or [::1]:8080';

export const listenSchema = z.string({ error: listenMessage }).refine((v) => {
  const m = listenPattern.exec(v);
  return m?.[1] !== undefined && Number(m[1]) <= 65535;
}, listenMessage);

export const databaseSchema = z
  .string({ error: 'expected sqlite:PATH or a PostgreSQL URL (postgres://user@host:5432/llmgw)' })
  .refine(
    (v) => /^sqlite:.+/.test(v) || /^postgres(?:ql)?:\/\/.+/.test(v),
    'expected sqlite:PATH (e.g. sqlite:/var/lib/llmgw/llmgw.db) or a PostgreSQL URL (postgres://user@host:5432/llmgw)',
  );

export const llamacppSettingsSchema = z.strictObject({
  /** llama-server to run; unset, the agent installs llama.cpp itself. */
  bin: z.string().min(1).optional(),
  /** Requests one server handles at once, when a profile does not say (llama.cpp's own default of one queues the rest). */
  parallel: z.int().min(1).max(512).default(4),
  /** CPU threads of a shard without a GPU; 0 takes half the node's CPUs. */
  threads: z.int().min(0).max(1024).default(0),
});

export const settingsSchema = z.strictObject({
  listen: listenSchema.default('127.0.0.1:8080'),
  database: databaseSchema.optional(),
  data_dir: z.string().min(1).default('./.llmgw'),
  agent: z
    .strictObject({
      /** How often agents report; a node silent for three of these is not ready. Set on the control plane. */
      heartbeat_ms: z.int().min(100).max(600_000).default(5000),
      engines: z
        .strictObject({
          llamacpp: llamacppSettingsSchema.default({ parallel: 4, threads: 0 }),
        })
        .default({ llamacpp: { parallel: 4, threads: 0 } }),
    })
    .default({ heartbeat_ms: 5000, engines: { llamacpp: { parallel: 4, threads: 0 } } }),
  // Each model is validated by the catalog's own rules, which give better messages than a nested schema.
  models: z.array(z.unknown()).default([]),
});

export type RawSettings = z.output<typeof settingsSchema>;
export type LlamacppSettings = z.output<typeof llamacppSettingsSchema>;
