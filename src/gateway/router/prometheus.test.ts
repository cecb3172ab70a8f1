import { describe, expect, it } from 'vitest';

import type { LoadMetrics } from '../../engines/types.js';

import { parseLoad } from './prometheus.js';

const llamacpp: LoadMetrics = {
  running: 'llamacpp:requests_processing',
  waiting: 'llamacpp:requests_deferred',
};
const vllm: LoadMetrics = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvUsage: 'vllm:kv_cache_usage_perc',
};
const sglang: LoadMetrics = {
  running: 'sglang:num_running_reqs',
  waiting: 'sglang:num_queue_reqs',
  kvUsage: 'sglang:token_usage',
};

/** The tail of a real llama-server's /metrics (build 10587) with three requests in flight. */
const llamacppInFlight = `# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 724
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 16260.2
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 12415.8
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 3
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 2.68627
`;

/** The same server before any request. */
const llamacppIdle = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 0
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 0
`;

/** vLLM V1 with two data-parallel engines: one sample per engine, and histograms beside. */
const vllmTwoEngines = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 3.0
vllm:num_requests_running{engine="1",model_name="qwen"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 1.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.25
# TYPE vllm:num_requests_running_total counter
vllm:num_requests_running_total{engine="0",model_name="qwen"} 99.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen"} 41.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 41.0
`;

describe('parseLoad', () => {
  it('reads a real llama-server with three requests in flight', () => {
    expect(parseLoad(llamacppInFlight, llamacpp)).toEqual({ running: 3, waiting: 0 });
  });

  it('reads a real idle llama-server', () => {
    expect(parseLoad(llamacppIdle, llamacpp)).toEqual({ running: 0, waiting: 0 });
  });

  it('sums vLLM samples across label sets and averages KV use; similar names do not count', () => {
    expect(parseLoad(vllmTwoEngines, vllm)).toEqual({ running: 5, waiting: 1, kvUsage: 0.375 });
  });

  it('reads SGLang names and its token usage', () => {
    const text = [
      '# TYPE sglang:num_running_reqs gauge',
      'sglang:num_running_reqs{model_name="m"} 7',
      'sglang:num_queue_reqs{model_name="m"} 12',
      'sglang:token_usage{model_name="m"} 0.81',
      'sglang:gen_throughput{model_name="m"} 1234.5',
    ].join('\n');
    expect(parseLoad(text, sglang)).toEqual({ running: 7, waiting: 12, kvUsage: 0.81 });
  });

  it('is undefined when running or waiting is absent', () => {
    expect(parseLoad('', llamacpp)).toBeUndefined();
    expect(parseLoad('llamacpp:requests_processing 2\n', llamacpp)).toBeUndefined();
    expect(parseLoad('llamacpp:requests_deferred 2\n', llamacpp)).toBeUndefined();
    // llama-server without --metrics answers 501 with JSON; TRT-LLM's /metrics is JSON.
    expect(
      parseLoad(
        '{"error":{"code":501,"message":"This server does not support metrics endpoint.","type":"not_supported_error"}}',
        llamacpp,
      ),
    ).toBeUndefined();
    expect(
      parseLoad('[{"numActiveRequests":2,"numQueuedRequests":0}]', {
        running: 'numActiveRequests',
        waiting: 'numQueuedRequests',
      }),
    ).toBeUndefined();
  });

  it('leaves KV use out when the engine does not report it', () => {
    const text = 'vllm:num_requests_running{model_name="m"} 1\nvllm:num_requests_waiting{model_name="m"} 0\n';
    expect(parseLoad(text, vllm)).toEqual({ running: 1, waiting: 0 });
  });

  it('reads every number form Prometheus writes, and skips NaN', () => {
    const text = [
      'vllm:num_requests_running{a="1"} 3',
      'vllm:num_requests_running{a="2"} 3.0',
      'vllm:num_requests_running{a="3"} 1e-3',
      'vllm:num_requests_running{a="4"} NaN',
      'vllm:num_requests_waiting +Inf',
      'vllm:kv_cache_usage_perc 2.5E-1 1712345678000',
    ].join('\n');
    expect(parseLoad(text, vllm)).toEqual({ running: 6.001, waiting: Infinity, kvUsage: 0.25 });
  });

  it('copes with CRLF, blank lines, timestamps, and braces or quotes inside label values', () => {
    const text = [
      '',
      '# HELP vllm:num_requests_running with a } in it',
      'vllm:num_requests_running{model_name="a}b",lora="x\\"}y"} 2 1712345678000\r',
      '   ',
      'vllm:num_requests_waiting{model_name="c"}   4\r',
      'vllm:num_requests_waiting{model_name="unterminated} 9',
      'vllm:num_requests_waiting{model_name="d"}',
    ].join('\r\n');
    expect(parseLoad(text, vllm)).toEqual({ running: 2, waiting: 4 });
  });

  it('reads a last line without a newline', () => {
    expect(parseLoad('llamacpp:requests_processing 1\nllamacpp:requests_deferred 5', llamacpp)).toEqual({
      running: 1,
      waiting: 5,
    });
  });

  it('parses a large vLLM page quickly enough to run four times a second per replica', () => {
    const lines: string[] = [];
    for (let i = 0; i < 2000; i++)
      lines.push(`vllm:e2e_request_latency_seconds_bucket{engine="0",le="${i}",model_name="m"} ${i}.0`);
    lines.push(vllmTwoEngines);
    const text = lines.join('\n');
    const started = performance.now();
    for (let i = 0; i < 100; i++) parseLoad(text, vllm);
    const perParseMs = (performance.now() - started) / 100;
    expect(parseLoad(text, vllm)).toEqual({ running: 5, waiting: 1, kvUsage: 0.375 });
    // Generous: 166 KB take about 0.3 ms here; this only catches a pathological slowdown.
    expect(perParseMs).toBeLessThan(20);
  });
});
