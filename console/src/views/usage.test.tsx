// @vitest-environment jsdom
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import type { UsageRow } from '../api.js';
import { refusal, renderAs, scriptedApi } from './admin-test-kit.js';
import { Usage } from './usage.js';

afterEach(cleanup);

beforeAll(() => {
  // recharts' ResponsiveContainer measures with ResizeObserver, which jsdom lacks.
  if (!('ResizeObserver' in globalThis)) {
    globalThis.ResizeObserver = class {
      observe() {}
      unobserve() {}
      disconnect() {}
    };
  }
});

const row = (hour: string, key: string, model: string, requests: number): UsageRow => ({
  hour: `2026-12-03T${hour}:00:00.000Z`,
  key_name: key,
  model,
  requests,
  prompt_tokens: requests * 10,
  completion_tokens: requests * 20,
});

describe('Usage', () => {
  it('asks for the last 24 hours, then for the filters given, and totals by model or key', async () => {
    const { api, calls } = scriptedApi((c) => {
      if (c.path.startsWith('/keys')) return { json: { items: [] } };
      if (c.path.includes('key=ci'))
        return { json: { items: [row('12', 'ci', 'llama:sql', 2), row('11', 'ci', 'qwen2.5-7b', 1)] } };
      if (c.path.startsWith('/usage')) return { json: { items: [row('12', 'app', 'qwen2.5-7b', 4)] } };
      return undefined;
    });
    renderAs(api, <Usage />);
    await screen.findByRole('table', { name: 'Totals by model' });
    const first = calls.find((c) => c.path.startsWith('/usage'))?.path ?? '';
    const since = new URLSearchParams(first.slice('/usage?'.length)).get('since') ?? '';
    // From the start of an hour, 23 hours back: 24 whole hours.
    expect(Date.now() - Date.parse(since)).toBeGreaterThan(23 * 3_600_000);
    expect(Date.now() - Date.parse(since)).toBeLessThanOrEqual(24 * 3_600_000);
    expect(Date.parse(since) % 3_600_000).toBe(0);

    fireEvent.change(screen.getByLabelText('Key'), { target: { value: 'ci' } });
    fireEvent.change(screen.getByLabelText('Since'), { target: { value: '0' } });
    fireEvent.click(screen.getByRole('button', { name: 'Show' }));
    await waitFor(() => {
      expect(calls.filter((c) => c.path.startsWith('/usage')).map((c) => c.path)).toContain('/usage?key=ci');
    });
    const totals = await screen.findByRole('table', { name: 'Totals by model' });
    await waitFor(() => {
      expect(
        within(totals)
          .getAllByRole('row')
          .map((r) => r.textContent),
      ).toEqual([
        'ModelRequestsPrompt tokensCompletion tokens',
        'llama:sql22040',
        'qwen2.5-7b11020',
        'All33060',
      ]);
    });
    fireEvent.change(screen.getByLabelText('Stack by'), { target: { value: 'key' } });
    const byKey = screen.getByRole('table', { name: 'Totals by key' });
    expect(
      within(byKey)
        .getAllByRole('row')
        .map((r) => r.textContent),
    ).toEqual(['KeyRequestsPrompt tokensCompletion tokens', 'ci33060', 'All33060']);
    // The charts load lazily, after the tables.
    expect(await screen.findByRole('img', { name: 'Requests per hour, stacked by key: ci' })).toBeTruthy();
  });

  it("shows the server's refusal where the usage would be", async () => {
    const { api } = scriptedApi((c) =>
      c.path.startsWith('/usage')
        ? refusal(403, 'permission_denied', 'key "ops" has the user role: this is for admin keys')
        : { json: { items: [] } },
    );
    renderAs(api, <Usage />);
    expect((await screen.findByRole('alert')).textContent).toBe(
      'Could not load usage: key "ops" has the user role: this is for admin keys',
    );
  });
});
