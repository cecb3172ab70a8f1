import type { Logger } from 'pino';

import { messageOf } from '../core/errors.js';
import { maxPortRanges } from '../protocol/agent-protocol.js';

import type { EngineRunner } from './engine-runners.js';
import { toRanges } from './shards/process/sockets.js';

export interface PortsReportOptions {
  runner: Pick<EngineRunner, 'portsTaken'>;
  logger: Logger;
  /** The placement range the last assignment named, if any. */
  range: () => { first: number; last: number } | undefined;
  /** The ports taken changed: report them. */
  onChange: () => void;
  /** How often they are looked at again (default 5 s). */
  intervalMs?: number | undefined;
}

/** The ports other programs listen on, for the control plane to place nothing there. */
export class PortsReport {
  readonly #o: PortsReportOptions;
  #timer: NodeJS.Timeout | undefined;
  /** The ports last reported taken, as sent. */
  #last = '';

  constructor(options: PortsReportOptions) {
    this.#o = options;
  }

  /**
   * Ports other programs listen on, as ranges: within the placement range once an
   * assignment named it, every one before (the control plane places nothing on a node
   * before its first report). Undefined where this machine cannot tell.
   */
  taken(): [number, number][] | undefined {
    const range = this.#o.range() ?? { first: 1, last: 65535 };
    const ports = this.#o.runner.portsTaken(range.first, range.last);
    return ports === undefined ? undefined : toRanges(ports).slice(0, maxPortRanges);
  }

  /** The ports to send now; remembered as the last reported. */
  forReport(): [number, number][] | undefined {
    const ports = this.taken();
    if (ports !== undefined) this.#last = JSON.stringify(ports);
    return ports;
  }

  /** Looks now and again at the ports other programs take, and reports when that changed. */
  watch(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => {
      try {
        const ports = this.taken();
        if (ports !== undefined && JSON.stringify(ports) !== this.#last) this.#o.onChange();
      } catch (e) {
        this.#o.logger.warn({ err: messageOf(e) }, 'could not read which ports are taken');
      }
    }, this.#o.intervalMs ?? 5000);
    this.#timer.unref();
  }

  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }
}
