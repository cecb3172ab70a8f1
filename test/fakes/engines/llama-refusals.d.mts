// Types of llama-refusals.mjs, for the tests that use it.
import type { IncomingMessage } from 'node:http';

export function readRaw(req: IncomingMessage): Promise<Buffer>;
export function llamaParse(raw: Buffer): { body?: unknown; error?: string };
export function chatRefusal(
  body: { messages: unknown[]; tools?: unknown },
  o: { vision: boolean },
): string | undefined;
