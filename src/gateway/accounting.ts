import type { Exchange } from './exchange.js';
import type { GatewayMetrics } from './gateway-metrics.js';
import type { ModelDemand } from './load-figures.js';
import type { KeyLimits } from './services.js';
import type { UsageRecorder } from './usage-recorder.js';

/** What an answered request counts: usage, the key's tokens, metrics, and a cold start it waited for. */
export class Accounting {
  readonly #o: { usage: UsageRecorder; limits: KeyLimits; metrics: GatewayMetrics; demand: ModelDemand };

  constructor(o: { usage: UsageRecorder; limits: KeyLimits; metrics: GatewayMetrics; demand: ModelDemand }) {
    this.#o = o;
  }

  account(x: Exchange): void {
    const { usage, limits, metrics } = this.#o;
    const key = x.principal?.name ?? '-';
    const model = x.model ?? '-';
    const prompt = x.usage?.prompt ?? 0;
    const completion = x.usage?.completion ?? 0;
    usage.record({ key, model, prompt, completion });
    if (x.principal !== undefined) limits.charge(key, prompt + completion, x.principal);
    metrics.countTokens(x.model, key, prompt, completion);
    if (x.ttftMs !== undefined) metrics.ttftFor(x.model).observe(x.ttftMs / 1000);
    if (x.roomAt !== undefined && x.base !== undefined && (x.status ?? 200) < 400) {
      // To the first token of a stream, else to the whole answer (now).
      const end = x.ttftMs === undefined ? performance.now() : x.started + x.ttftMs;
      const ms = Math.max(0, end - x.roomAt);
      this.#o.demand.coldStart(x.base, ms);
      metrics.coldStarted(x.base, ms / 1000);
    }
  }
}
