import type { GatewayKeys, GatewayPrincipal } from '../keys.js';
import { GatewayError, type GatewayErrorCode } from '../openai-errors.js';
import type { KeyLimits } from '../services.js';
import type { ScaleSignals } from '../../protocol/load-report.js';

import type { Call, CallResult, ToPrimary, WireError } from './messages.js';

/** How long a call to the primary may take before the request is refused (it is on this machine). */
const callTimeoutMs = 10_000;

/** The worker's end of its IPC channel: calls answered by the primary, and messages. */
export class Channel {
  readonly #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  #next = 1;

  send(m: ToPrimary): Promise<void> {
    return new Promise((resolve) => {
      if (process.send === undefined || !process.connected) {
        resolve();
        return;
      }
      process.send(m, undefined, {}, () => {
        resolve();
      });
    });
  }

  call<M extends Call['method']>(call: Extract<Call, { method: M }>): Promise<CallResult[M]> {
    const id = this.#next++;
    return new Promise<CallResult[M]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(primaryAway(`it did not answer in ${callTimeoutMs / 1000} s`));
      }, callTimeoutMs);
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      if (process.send === undefined || !process.connected) {
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(primaryAway('its channel is closed'));
        return;
      }
      process.send({ t: 'call', id, call } satisfies ToPrimary);
    });
  }

  reply(id: number, value: unknown, error: WireError | undefined): void {
    const p = this.#pending.get(id);
    if (p === undefined) return;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    if (error === undefined) p.resolve(value);
    else
      p.reject(
        new GatewayError(error.code as GatewayErrorCode, error.message, { retryAfterS: error.retryAfterS }),
      );
  }
}

function primaryAway(why: string): GatewayError {
  return new GatewayError(
    'no_ready_replica',
    `this gateway worker cannot reach its primary process (${why}): retry in a moment`,
    { retryAfterS: 5 },
  );
}

/** Keys answered by the primary, kept here `ttlMs` (a revocation reaches workers within it). */
export function workerKeys(channel: Channel, ttlMs: number): GatewayKeys {
  const recent = new Map<string, { p: GatewayPrincipal; until: number }>();
  return {
    async check(secret) {
      const now = Date.now();
      if (secret !== undefined) {
        const hit = recent.get(secret);
        if (hit !== undefined && hit.until > now) return hit.p;
      }
      // No key at all is the primary's to refuse too: one place words every refusal.
      const p = await channel.call({ method: 'key', secret: secret ?? '' });
      if (secret !== undefined) {
        if (recent.size >= 10_000) recent.clear();
        recent.set(secret, { p, until: now + ttlMs });
      }
      return p;
    },
  };
}

/**
 * The autoscaler's signals from a worker: its load reports and wake-ups go to the primary,
 * which hands them to its own (in memory in the control plane, over the API in `llmgw gateway`).
 */
export function workerSignals(channel: Channel): ScaleSignals {
  return {
    report: (report) => channel.send({ t: 'report', report }),
    wake: (model) => channel.call({ method: 'wake', model }),
  };
}

/** A key without limits costs nothing here; one with limits is counted by the primary, for every worker at once. */
export function workerLimits(channel: Channel): KeyLimits {
  return {
    admit(key, limits) {
      if (limits.rpm === null && limits.tpm === null) return undefined;
      return channel.call({ method: 'admit', key, rpm: limits.rpm, tpm: limits.tpm });
    },
    charge(key, tokens, limits) {
      if (limits.tpm === null || tokens <= 0) return;
      void channel.send({ t: 'charge', key, tokens, tpm: limits.tpm });
    },
  };
}
