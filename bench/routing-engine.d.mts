// Types of routing-engine.mjs, for the test that uses it.
export declare const CHARS_PER_TOKEN: number;
export declare const BLOCK_TOKENS: number;
export interface Prompt {
  hashes: number[];
  tokens: number;
}
export declare function templated(messages: readonly { role: string; content: string }[]): string;
export declare function engineBlocks(text: string): Prompt;
export declare const loadMetricsOf: Record<
  'vllm' | 'sglang' | 'llamacpp',
  { running: string; waiting: string; kvUsage?: string }
>;

export interface SimEngineOptions {
  id: string;
  engine: 'vllm' | 'sglang' | 'llamacpp';
  slots: number;
  cacheBlocks: number;
  prefillMsPerToken: number;
  decodeMsPerToken: number;
  apiKey: string;
  servedName?: string;
  now?: () => number;
}

export declare class SimEngine {
  constructor(o: SimEngineOptions);
  readonly id: string;
  readonly engine: 'vllm' | 'sglang' | 'llamacpp';
  readonly slots: number;
  url: string | undefined;
  promptTokens: number;
  cachedTokens: number;
  generated: number;
  requests: number;
  running: Set<unknown>;
  waiting: unknown[];
  listen(): Promise<string>;
  close(): Promise<void>;
  reset(): void;
  matched(hashes: readonly number[], withPending: boolean): number;
  predictTtft(prompt: Prompt): number;
  metrics(): string;
}
