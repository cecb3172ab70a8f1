// @vitest-environment jsdom
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';

import type { AuditView } from '../api.js';
import { refusal, renderAs, scriptedApi } from './admin-test-kit.js';
import { Audit } from './audit.js';

afterEach(cleanup);

const entry = (id: number, o: Partial<AuditView> = {}): AuditView => ({
  id,
  at: '2026-12-03T10:00:00.000Z',
  actor: 'root',
  action: 'model.update',
  target: 'model/qwen',
  detail: { changes: [{ path: 'replicas', before: 1, after: 2 }] },
  ...o,
});

function fill(label: string, value: string) {
  fireEvent.change(screen.getByLabelText(label), { target: { value } });
}

describe('Audit', () => {
  it('builds the query from the filters, and pages back by id', async () => {
    const { api, calls } = scriptedApi((c) => {
      if (c.path.includes('before=')) return { json: { items: [entry(3)] } };
      // Full pages of 50 while filtered, so there is an older page to ask for.
      if (c.path.includes('actor='))
        return { json: { items: Array.from({ length: 50 }, (_, i) => entry(200 - i)) } };
      return { json: { items: [entry(1)] } };
    });
    renderAs(api, <Audit />);
    await screen.findByRole('table', { name: 'Audit entries' });
    expect(calls.map((c) => c.path)).toEqual(['/audit?limit=50']);
    expect(screen.queryByRole('button', { name: 'Older entries' })).toBeNull();

    fill('Actor', 'ci-bot');
    fill('Action', 'key.create');
    fill('Target', 'key/app');
    fill('Since', '2026-12-01T09:00:00Z');
    fireEvent.click(screen.getByRole('button', { name: 'Filter' }));
    await waitFor(() => {
      expect(calls).toHaveLength(2);
    });
    expect(calls[1]?.path).toBe(
      '/audit?limit=50&actor=ci-bot&action=key.create&target=key%2Fapp&since=2026-12-01T09%3A00%3A00.000Z',
    );

    fireEvent.click(await screen.findByRole('button', { name: 'Older entries' }));
    await waitFor(() => {
      expect(calls).toHaveLength(3);
    });
    expect(calls[2]?.path).toBe(
      '/audit?limit=50&before=151&actor=ci-bot&action=key.create&target=key%2Fapp&since=2026-12-01T09%3A00%3A00.000Z',
    );
    const table = screen.getByRole('table', { name: 'Audit entries' });
    await waitFor(() => {
      expect(within(table).getAllByRole('row')).toHaveLength(52);
    });
  });

  it('refuses a since it cannot read at the field, without asking the server', async () => {
    const { api, calls } = scriptedApi(() => ({ json: { items: [] } }));
    renderAs(api, <Audit />);
    await screen.findByText('No entries match.');
    fill('Since', 'last week');
    fireEvent.click(screen.getByRole('button', { name: 'Filter' }));
    expect((await screen.findByRole('alert')).textContent).toBe(
      '"last week" is neither a time (2026-12-01T09:00:00Z) nor a duration back (30m, 2h, 7d)',
    );
    expect(screen.getByLabelText('Since').getAttribute('aria-invalid')).toBe('true');
    expect(calls).toHaveLength(1);
  });

  it('shows the detail in brief, expandable to the whole entry', async () => {
    const { api } = scriptedApi(() => ({ json: { items: [entry(7)] } }));
    renderAs(api, <Audit />);
    const summary = await screen.findByText('replicas: 1 -> 2');
    expect(summary.tagName).toBe('SUMMARY');
    const details = summary.closest('details');
    expect(details?.querySelector('pre')?.textContent).toBe(JSON.stringify(entry(7).detail, null, 2));
  });

  it("shows the server's refusal of a filter where the entries would be", async () => {
    const { api } = scriptedApi(() =>
      refusal(
        400,
        'invalid_argument',
        'invalid query:\n  since: expected an ISO time such as 2026-12-01T09:00:00Z',
      ),
    );
    renderAs(api, <Audit />);
    expect((await screen.findByRole('alert')).textContent).toBe(
      'Could not load the audit log: invalid query:\n  since: expected an ISO time such as 2026-12-01T09:00:00Z',
    );
  });
});
