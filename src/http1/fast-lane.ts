import type { FastRequest } from './fast-request.js';
import type { FastResponse } from './fast-response.js';

export type FastHandler = (req: FastRequest, res: FastResponse) => void;

export interface FastLane {
  /** Path prefix: `/v1/`. */
  prefix: string;
  /** A longer body is left to node:http (the handler answers it there, 413 and all). */
  maxBodyBytes: number;
  handler: FastHandler;
}
