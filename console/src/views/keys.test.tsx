// @vitest-environment jsdom
import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';

import type { KeyView } from '../api.js';
import { refusal, renderAs, scriptedApi, type Call } from './admin-test-kit.js';
import { Keys } from './keys.js';

afterEach(cleanup);

const key = (o: Partial<KeyView> & Pick<KeyView, 'name'>): KeyView => ({
  role: 'user',
  prefix: 'llmgw_key_ab12...',
  created_at: '2026-12-01T09:00:00.000Z',
  created_by: 'root',
  revoked_at: null,
  revoked_by: null,
  last_used_at: null,
  allowed_models: null,
  rpm: null,
  tpm: null,
  ...o,
});

const secret = 'llmgw_key_s3cr3t5ecr3t5ecr3t';

function fill(label: string, value: string) {
  fireEvent.change(screen.getByLabelText(label), { target: { value } });
}

describe('Keys', () => {
  it('creates a key with its limits and shows the secret once, with Copy and a warning', async () => {
    let list = [key({ name: 'root', role: 'admin' })];
    const { api, calls } = scriptedApi((c: Call) => {
      if (c.method === 'GET' && c.path === '/keys?revoked=true') return { json: { items: list } };
      if (c.method === 'POST' && c.path === '/keys') {
        const created = key({ name: 'ci-bot', allowed_models: ['qwen'], rpm: 60 });
        list = [...list, created];
        return { status: 201, json: { key: created, secret } };
      }
      return undefined;
    });
    const writeText = vi.fn(() => Promise.resolve());
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    renderAs(api, <Keys />);
    await screen.findByRole('table', { name: 'API keys' });

    fill('Name', 'ci-bot');
    fill('Allowed models', 'qwen');
    fill('Requests a minute', '60');
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));

    const box = await screen.findByRole('textbox', { name: 'Secret of key ci-bot' });
    expect((box as HTMLInputElement).value).toBe(secret);
    expect(document.activeElement).toBe(box);
    expect(screen.getByRole('note').textContent).toMatch(/it will not be shown again/);
    expect(JSON.parse(calls.find((c) => c.method === 'POST')?.body ?? '')).toEqual({
      name: 'ci-bot',
      role: 'user',
      models: ['qwen'],
      rpm: 60,
      tpm: null,
    });
    fireEvent.click(screen.getByRole('button', { name: 'Copy' }));
    expect(writeText).toHaveBeenCalledWith(secret);
    expect(await screen.findByText('Copied.')).toBeTruthy();

    // The list shows the new key by its prefix; once dismissed, the secret is nowhere on the page.
    const table = screen.getByRole('table', { name: 'API keys' });
    await within(table).findByRole('rowheader', { name: 'ci-bot' });
    fireEvent.click(screen.getByRole('button', { name: 'Done: I have copied it' }));
    expect(document.body.textContent).not.toContain(secret);
    expect(screen.queryByDisplayValue(secret)).toBeNull();
    expect(screen.getByRole('button', { name: 'Create key' })).toBeTruthy();
  });

  it("shows a refused create in the server's words at the form, and a bad limit at its field", async () => {
    const { api, calls } = scriptedApi((c) => {
      if (c.method === 'GET') return { json: { items: [] } };
      if (c.method === 'POST')
        return refusal(409, 'conflict', 'a key named "ci-bot" exists: pick another name');
      return undefined;
    });
    renderAs(api, <Keys />);
    fill('Name', 'ci-bot');
    fill('Tokens a minute', 'lots');
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    expect((await screen.findByRole('alert')).textContent).toBe(
      'Tokens a minute is a whole number, 1 or more (got "lots"); leave it empty for no limit',
    );
    expect(calls.filter((c) => c.method === 'POST')).toEqual([]);

    fill('Tokens a minute', '');
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    expect((await screen.findByRole('alert')).textContent).toBe(
      'a key named "ci-bot" exists: pick another name',
    );
    expect(screen.queryByRole('textbox', { name: /Secret of key/ })).toBeNull();
  });

  it('revokes a key after a confirmation, and shows a refusal there', async () => {
    const { api, calls } = scriptedApi((c) => {
      if (c.method === 'GET')
        return { json: { items: [key({ name: 'root', role: 'admin' }), key({ name: 'app' })] } };
      if (c.method === 'DELETE' && c.path === '/keys/root')
        return refusal(
          409,
          'conflict',
          'key "root" is the one making this request: revoke it with another admin key',
        );
      if (c.method === 'DELETE' && c.path === '/keys/app')
        return { json: key({ name: 'app', revoked_at: '2026-12-03T10:00:00Z', revoked_by: 'root' }) };
      return undefined;
    });
    renderAs(api, <Keys />);
    // The confirmation opens on Cancel, and Escape closes it without revoking.
    fireEvent.click(await screen.findByRole('button', { name: 'Revoke app' }));
    expect(document.activeElement?.textContent).toBe('Cancel');
    fireEvent.keyDown(screen.getByRole('group', { name: 'Revoke app' }), { key: 'Escape' });
    expect(screen.queryByRole('group', { name: 'Revoke app' })).toBeNull();

    fireEvent.click(await screen.findByRole('button', { name: 'Revoke root' }));
    const confirm = screen.getByRole('group', { name: 'Revoke root' });
    expect(calls.filter((c) => c.method === 'DELETE')).toEqual([]);
    fireEvent.click(within(confirm).getByRole('button', { name: 'Revoke root' }));
    expect((await within(confirm).findByRole('alert')).textContent).toBe(
      'key "root" is the one making this request: revoke it with another admin key',
    );

    fireEvent.click(screen.getByRole('button', { name: 'Revoke app' }));
    const other = screen.getByRole('group', { name: 'Revoke app' });
    fireEvent.click(within(other).getByRole('button', { name: 'Revoke app' }));
    await waitFor(() => {
      expect(screen.queryByRole('group', { name: 'Revoke app' })).toBeNull();
    });
    expect(calls.filter((c) => c.method === 'DELETE').map((c) => c.path)).toEqual([
      '/keys/root',
      '/keys/app',
    ]);
  });

  it('changes limits: a cleared field is sent as null, and a refusal shows at the form', async () => {
    const { api, calls } = scriptedApi((c) => {
      if (c.method === 'GET')
        return { json: { items: [key({ name: 'app', allowed_models: ['qwen'], rpm: 10 })] } };
      if (c.method === 'PATCH')
        return refusal(404, 'not_found', 'no key named "app": it may have been removed');
      return undefined;
    });
    renderAs(api, <Keys />);
    fireEvent.click(await screen.findByRole('button', { name: 'Edit limits of app' }));
    const form = screen.getByRole('form', { name: 'Limits of app' });
    const rpm = within(form).getByLabelText('Requests a minute');
    expect((rpm as HTMLInputElement).value).toBe('10');
    fireEvent.change(rpm, { target: { value: '' } });
    fireEvent.change(within(form).getByLabelText('Tokens a minute'), { target: { value: '9000' } });
    fireEvent.click(within(form).getByRole('button', { name: 'Save limits' }));
    expect((await within(form).findByRole('alert')).textContent).toBe(
      'no key named "app": it may have been removed',
    );
    const patch = calls.find((c) => c.method === 'PATCH');
    expect(patch?.path).toBe('/keys/app');
    expect(JSON.parse(patch?.body ?? '')).toEqual({ models: ['qwen'], rpm: null, tpm: 9000 });
  });
});
