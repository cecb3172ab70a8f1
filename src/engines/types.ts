import type { CatalogEngine } from '../catalog/catalog-engine.js';
import type { EngineName, ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import type { Device } from '../gpu/types.js';
import type { PlanEngine } from '../planner/plan-engine.js';

/**
 * An engine is what llmgw launches, never what it writes: llama.cpp's llama-server,
 * vLLM, SGLang, TensorRT-LLM. Each module under engines/ describes one, in the same
 * shape: where it answers health and metrics, which ranks serve HTTP, what it accepts,
 * and the processes of one shard — a pure function of the shard, tested argument by
 * argument.
 */

/** The devices of one shard, as its engine needs them. */
export type ShardDevice = Pick<Device, 'id' | 'label' | 'card' | 'uuid' | 'mig' | 'class'>;

/** The agent's engine settings that reach the command line. */
export interface EngineSettings {
  /**
   * The executable this shard runs, as its runner chose it: the one inside its image for a
   * container, else the one the agent installed, else the node's configured one, else the
   * engine's defaultBin.
   */
  bin: string;
  /** llama.cpp's own settings (agent.engines.llamacpp). */
  llamacpp: {
    /** Requests one server handles at once, when the profile does not say. */
    parallel: number;
    /** CPU threads when placement reserved none; 0 takes half the CPUs. */
    threads: number;
  };
  /** CPUs of this node, for llama.cpp's default of half of them. */
  cpuCount: number;
}

/** Everything one shard's command line is made from. */
export interface ShardLaunch {
  /** The replica's id (also the process name in logs). */
  replica: string;
  model: ModelSpec;
  profile: ProfileSpec;
  /** This shard's place in a multi-node replica: rank 0 of 1 for single-node. */
  rank: number;
  ranks: number;
  /** Where the shard's HTTP server binds and listens. */
  host: string;
  port: number;
  /** Multi-node: where rank 0 accepts the other ranks (torch.distributed / NCCL init). */
  head?: { address: string; port: number } | undefined;
  /** Empty on a CPU placement. */
  devices: ShardDevice[];
  /** CPU threads placement reserved (CPU shards). */
  threads?: number | undefined;
  /** The key the engine requires; only the gateway knows it. */
  apiKey: string;
  /** Where the weights are on this node. */
  weights: Weights;
  settings: EngineSettings;
}

/**
 * The model's files on this node: a file, or a directory (with its file names, read by the
 * agent, so the command stays a pure function); for a GGUF the agent fetched, the file to
 * load and its vision projector. Engines never download: the agent fetched the files
 * (`ctl model pull` and the shard's `downloading` state), or they were put there by hand.
 */
export interface Weights {
  path: string;
  files?: readonly string[] | undefined;
  /** llama.cpp's mmproj file, when `path` is the model file itself. */
  projector?: string | undefined;
}

/** One process to start. */
export interface ProcessSpec {
  /** A short name for logs: `llama-server`, `vllm`. */
  name: string;
  bin: string;
  args: string[];
  /** Added to the agent's environment. */
  env: Record<string, string>;
}

/** The engine's own Prometheus names for load, read by the gateway's router. */
export interface LoadMetrics {
  /** Requests being computed now. */
  running: string;
  /** Requests queued in the engine. */
  waiting: string;
  /** KV cache use, 0..1, where the engine reports one. */
  kvUsage?: string;
}

export interface Engine extends EngineTraits {
  readonly name: EngineName;
  /** Where readiness is asked. */
  readonly healthPath: string;
  readonly metricsPath: string;
  readonly loadMetrics: LoadMetrics;
  /** How the engine behaves while loading, for the supervisor's readiness check. */
  readonly loading: 'answers-503' | 'refuses-connections';
  /** Whether a rank answers the OpenAI API (and so gets the API port and health checks). */
  servesHttp(rank: number, ranks: number): boolean;
  /**
   * Problems running this profile on these devices (those placement would give one
   * replica on one node), each saying what to change; empty when it can run.
   */
  validate(profile: ProfileSpec, devices: readonly ShardDevice[]): string[];
  /** The processes of one shard. Throws LlmgwError when the weights cannot be used (no model file). */
  commands(launch: ShardLaunch): ProcessSpec[];

  // --- What the gateway asks of an engine (so that it compares no engine's name) ---
  /** Whether it serves OpenAI's Responses API at /v1/responses. */
  readonly servesResponses: boolean;
  /**
   * Names a LoRA adapter in a request to it. `body` is the gateway's copy of the client's,
   * its `model` already the engine's name for the model, changed in place; `loaded` is the
   * replica's adapters in load order.
   */
  selectAdapter(body: Record<string, unknown>, adapter: string, loaded: readonly string[]): void;
  // --- end of what the gateway asks ---

  // ── Added for the agent (issue 26, helper "shards"): what the agent asks of an engine as
  //    it turns an assignment into runs, so that it compares no engine's name. ──
  /**
   * Whether the agent installs this engine's binary itself for process runs (llama.cpp's
   * release archives, whose install adds its own environment); else the binary is the
   * configured one or found on PATH. Containers bring their own either way.
   */
  readonly installedByAgent: boolean;
  /**
   * What the engine is given of files the agent fetched: one model file and its projector
   * (a GGUF), or the snapshot directory. Throws, in words, when nothing fits.
   */
  fetchedWeights(fetched: FetchedFiles): Weights;
  // ── end of the agent's additions ──
}

/** An adapter named as the request's model: how vLLM, SGLang and TensorRT-LLM serve LoRA adapters. */
export function adapterAsModel(body: Record<string, unknown>, adapter: string): void {
  body['model'] = adapter;
}

/** Files the agent fetched for a shard (issue 26, helper "shards"): what the origin lists, and where each is. */
export interface FetchedFiles {
  /** Where they came from, for messages: `hf://org/repo`. */
  source: string;
  /** The origin's file paths, in its order, relative to the repository. */
  files: readonly string[];
  snapshotDir: string;
  /** Origin path -> the path to give the engine; absent: under `snapshotDir`. */
  paths: Readonly<Record<string, string>>;
}

// ── What llmgw knows of an engine beyond its command line (issue 26, point 3) ──────────────
// The planner, the catalog, the fleet and the cli ask these through the registry, so that no
// engine's name is compared outside src/engines/. What the planner asks is its own interface
// (planner/plan-engine.ts: label, CPUs, weight formats, split, context and card flags, budget),
// and so is the catalog's (catalog/catalog-engine.ts: split problems, adapters, owned flags and
// environment), which engines implement, since neither folder may import them.
export interface EngineTraits extends PlanEngine, CatalogEngine {
  /** Requests one replica computes at once: its args, else its default (`defaultSlots`: the node's llama.cpp --parallel). */
  capacity(args: readonly string[], defaultSlots: number): number;
  /**
   * Its official image for `runtime: container` when neither the profile nor the node names
   * one, pinned so that every node of a cluster runs the same engine (container-images.ts).
   */
  defaultImage(o: { gpu: boolean; llamaBuild: string }): string;
  /** Its executable inside that image (the agent's command line replaces the entrypoint). */
  readonly imageExecutable: string;
  /** Its executable on a node when the settings name none: its usual name on PATH. */
  readonly defaultBin: string;
  /**
   * How `llmgw doctor` finds it on a node where the agent does not install it
   * (installedByAgent): an executable on PATH, or a Python module and the command that launches it.
   */
  readonly onNode?: { bin: string } | { pythonModule: string; launch: string } | undefined;
}
// ── end of the engine traits (issue 26, point 3) ──────────────────────────────────────────
