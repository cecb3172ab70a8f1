import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadSettings } from '../config/load.js';
import { gatewayOptions } from './gateway-compose.js';

function settings(text: string) {
  const d = mkdtempSync(join(tmpdir(), 'llmgw-compose-'));
  writeFileSync(join(d, 'llmgw.yaml'), text);
  return loadSettings({ path: join(d, 'llmgw.yaml'), env: { LLMGW_DATA_DIR: join(d, 'data') }, cwd: d })
    .settings;
}

describe('gateway.waiting_room', () => {
  it('defaults to 1000 requests per model for 300 s, and is passed to the gateway', () => {
    expect(gatewayOptions(settings('{}\n')).waitingRoom).toEqual({ maxPerModel: 1000, timeoutMs: 300_000 });
    expect(
      gatewayOptions(settings('gateway:\n  waiting_room: {max_per_model: 50, timeout_s: 600}\n')).waitingRoom,
    ).toEqual({ maxPerModel: 50, timeoutMs: 600_000 });
  });

  it('refuses values out of range, saying what fits', () => {
    expect(() => settings('gateway:\n  waiting_room: {timeout_s: 0.5}\n')).toThrow(
      /gateway\.waiting_room\.timeout_s: at least 1 s/,
    );
    expect(() => settings('gateway:\n  waiting_room: {max_per_model: many}\n')).toThrow(
      /gateway\.waiting_room\.max_per_model: a whole number of requests, e\.g\. 1000/,
    );
  });
});
