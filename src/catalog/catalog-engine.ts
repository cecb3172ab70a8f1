/**
 * What the catalog asks of an engine to check a profile. The catalog names no engine: it is
 * given the engines it checks against (the registry's, src/engines/registry.ts), whose folders
 * answer this, so that a new engine is one folder and one line of the registry.
 */
export interface CatalogEngine {
  /** What `engine:` says. */
  readonly name: string;
  /** Whether it runs a CPU profile (cpu: true). */
  readonly runsOnCpu: boolean;
  /**
   * `layer`: the layers over gpus_per_node cards of one node (tp, pp and nodes refused by
   * `splitProblems`); `tensor`: tp × pp cards over gpus_per_node × nodes, gpus_per_node
   * derived from them when not written.
   */
  readonly split: 'layer' | 'tensor';
  /** A GPU profile's tp, pp or nodes this engine refuses, each at its key, saying what to write. */
  splitProblems?(p: {
    tp: number;
    pp: number;
    nodes: number;
  }): { key: 'tp' | 'pp' | 'nodes'; message: string }[];
  /** Why llmgw serves no LoRA adapters on it; undefined where it does. */
  readonly noAdapters?: string | undefined;
  /** Flags llmgw sets itself on its command line; a profile that set them would break routing or security. */
  readonly ownedFlags: readonly string[];
  /** Environment variables llmgw sets itself on it, each with who sets it. */
  readonly ownedEnv: Readonly<Record<string, string>>;
}
