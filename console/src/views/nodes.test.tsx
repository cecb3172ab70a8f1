// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';

import type { Api, CreatedJoinToken, NodeView, Role } from '../api.js';
import { SessionProvider } from '../session.js';
import { Nodes } from './nodes.js';
import { errorBody, fakeApi } from './test-api.js';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  Reflect.deleteProperty(navigator, 'clipboard');
});

const gpu1: NodeView = {
  id: 'n1',
  name: 'gpu-1',
  state: 'ready',
  last_seen: new Date(Date.now() - 5000).toISOString(),
  address: '10.0.0.2',
  agent_version: '0.1.0',
  joined_at: '2026-12-01T00:00:00Z',
  host: {
    hostname: 'gpu-1',
    os: 'linux',
    arch: 'x64',
    cpus: { count: 32, model: 'EPYC' },
    memory: { total_mib: 65536, free_mib: 32768 },
    disk: { path: '/', total_mib: 1, free_mib: 1 },
  },
  discovery: { method: 'nvml', reasons: [] },
  driver_version: '550.54',
  devices: [
    {
      id: 0,
      label: '0',
      class: 'a100-80g',
      card: 0,
      uuid: 'GPU-0',
      memory_total_mib: 81920,
      memory_used_mib: 40960,
      temperature_c: 41,
      power_w: 120,
      utilization_pct: 35,
      wear: {},
      processes: [{ pid: 4242, name: 'vllm', memory_mib: 40000 }],
    },
    {
      id: 1101,
      label: '1/mig1',
      class: 'a100-80g-mig-3g.40gb',
      card: 1,
      uuid: 'MIG-1',
      mig: { profile: '3g.40gb', instance: 1, gpu_instance_id: 2, compute_instance_id: 0 },
      memory_total_mib: 40192,
      memory_used_mib: 0,
      temperature_c: 39,
      power_w: 60,
      wear: {},
      processes: [],
    },
  ],
  excluded: [{ card: 2, uuid: 'GPU-2', class: 'a100-80g', reason: 'MIG mode is on but it has no instances' }],
  devices_by_class: { 'a100-80g': 1, 'a100-80g-mig-3g.40gb': 1 },
  devices_in_use_by_class: {},
};

function show(api: Api, role: Role) {
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <SessionProvider session={{ api, name: 'ops', role, signOut: () => undefined }}>
        <Nodes />
      </SessionProvider>
    </QueryClientProvider>,
  );
}

const created: CreatedJoinToken = {
  token: {
    name: 'rack-3',
    prefix: 'llmgw_join_Ab',
    created_at: '2026-12-03T13:00:00Z',
    created_by: 'ops',
    expires_at: null,
    revoked_at: null,
    last_used_at: null,
    uses: 0,
  },
  secret: 'llmgw_join_AbCdEfSecret',
};

describe('Nodes', () => {
  it('shows each device (card and MIG instance) with its figures, the cards left out and the warnings; a user key sees no admin actions', async () => {
    const { api } = fakeApi({ 'GET /nodes': { json: { items: [gpu1] } } });
    show(api, 'user');
    const table = await screen.findByRole('table', { name: 'Devices of gpu-1' });
    const cells = (id: string) =>
      within(within(table).getByRole('row', { name: new RegExp(`^${id} `) }))
        .getAllByRole('cell')
        .map((c) => c.textContent);
    expect(cells('0')).toEqual([
      'a100-80g (card)',
      ' 40,960 / 81,920 MiB',
      '41 °C',
      '120 W',
      '35 %',
      '4242 vllm (40,000 MiB)',
    ]);
    expect(cells('1/mig1')).toEqual([
      'a100-80g-mig-3g.40gb (MIG 3g.40gb)',
      ' 0 / 40,192 MiB',
      '39 °C',
      '60 W',
      'not measured on MIG',
      '—',
    ]);
    const bar = screen.getByRole('meter', { name: 'memory of gpu-1 0' });
    expect(bar.getAttribute('value')).toBe('40960');
    expect(bar.getAttribute('max')).toBe('81920');
    const card = screen.getByRole('article', { name: 'gpu-1' });
    // The left-out card twice: in the doctor's words (it blocks) and with the cards left out.
    const items = within(card)
      .getAllByRole('listitem')
      .map((li) => li.textContent);
    expect(items).toContain('card 2 (a100-80g) can run nothing: MIG mode is on but it has no instances');
    expect(items).toContain('card 2 (a100-80g): MIG mode is on but it has no instances');
    expect(within(card).getByText('Ready')).toBeTruthy();
    expect(within(card).getByText('5s')).toBeTruthy();
    expect(screen.queryByRole('button', { name: /Join token/ })).toBeNull();
    expect(screen.queryByRole('button', { name: /Remove/ })).toBeNull();
  });

  it('shows a join token once, copyable, with the command to run; closing the dialog forgets it', async () => {
    const { api, sent } = fakeApi({
      'GET /nodes': { json: { items: [gpu1] } },
      'POST /node-tokens': { status: 201, json: created },
    });
    const writeText = vi.fn(() => Promise.resolve());
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Join token…' }));
    const dialog = screen.getByRole('dialog', { name: 'Join token' });
    fireEvent.change(within(dialog).getByLabelText('Name (optional)'), { target: { value: 'rack-3' } });
    fireEvent.change(within(dialog).getByLabelText('Valid for'), { target: { value: '2' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Create token' }));

    const secret = await within(dialog).findByLabelText<HTMLInputElement>('Token');
    expect(secret.value).toBe('llmgw_join_AbCdEfSecret');
    expect(within(dialog).getByText('It is shown only this once.')).toBeTruthy();
    const command = within(dialog).getByLabelText<HTMLInputElement>('On each machine to join, run');
    expect(command.value).toBe(
      `llmgw agent --server ${window.location.origin} --token llmgw_join_AbCdEfSecret`,
    );
    expect(sent.filter((s) => s.method === 'POST')).toMatchObject([
      { path: '/node-tokens', body: { name: 'rack-3', expires_in: 86400 } },
    ]);

    fireEvent.click(within(dialog).getByRole('button', { name: 'Copy the command' }));
    await waitFor(() => {
      expect(writeText).toHaveBeenCalledWith(command.value);
    });
    expect(await within(dialog).findByText('Copied')).toBeTruthy();

    fireEvent.click(within(dialog).getByRole('button', { name: 'Done' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.body.textContent).not.toContain('AbCdEfSecret');
    fireEvent.click(screen.getByRole('button', { name: 'Join token…' }));
    expect(screen.getByRole('button', { name: 'Create token' })).toBeTruthy();
    expect(document.body.textContent).not.toContain('AbCdEfSecret');
    expect(sent.filter((s) => s.method === 'POST')).toHaveLength(1);
  });

  it('opens the token dialog on its name field, and Escape closes it back to its button', async () => {
    const { api } = fakeApi({ 'GET /nodes': { json: { items: [] } } });
    show(api, 'admin');
    const opener = await screen.findByRole('button', { name: 'Join token…' });
    fireEvent.click(opener);
    expect(document.activeElement).toBe(screen.getByLabelText('Name (optional)'));
    fireEvent.keyDown(document.activeElement!, { key: 'Escape' });
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.activeElement).toBe(opener);
  });

  it('without a clipboard (plain http), selects the token for the user to copy', async () => {
    const { api } = fakeApi({
      'GET /nodes': { json: { items: [] } },
      'POST /node-tokens': { status: 201, json: created },
    });
    show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Join token…' }));
    fireEvent.click(screen.getByRole('button', { name: 'Create token' }));
    const secret = await screen.findByLabelText<HTMLInputElement>('Token');
    fireEvent.click(screen.getByRole('button', { name: 'Copy the token' }));
    expect(await screen.findByText('Selected: press Ctrl+C (⌘C) to copy')).toBeTruthy();
    expect(document.activeElement).toBe(secret);
    expect([secret.selectionStart, secret.selectionEnd]).toEqual([0, secret.value.length]);
  });

  it("shows the server's refusal of a token in the dialog, and makes none", async () => {
    const message = 'a token name is lower-case letters, digits, ".", "_" and "-" (e.g. "rack-3")';
    const { api } = fakeApi({
      'GET /nodes': { json: { items: [] } },
      'POST /node-tokens': { status: 400, json: errorBody('invalid_argument', message) },
    });
    show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Join token…' }));
    const dialog = screen.getByRole('dialog', { name: 'Join token' });
    fireEvent.change(within(dialog).getByLabelText('Name (optional)'), { target: { value: 'Rack 3' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Create token' }));
    expect((await within(dialog).findByRole('alert')).textContent).toBe(message);
    expect(within(dialog).queryByLabelText('Token')).toBeNull();
  });

  it('removes a node when asked twice, and shows a refusal beside the button that acted', async () => {
    const message = 'no node is named "gpu-1" (llmgw ctl nodes lists them)';
    const { api, sent } = fakeApi({
      'GET /nodes': { json: { items: [gpu1, { ...gpu1, id: 'n2', name: 'gpu-2' }] } },
      'DELETE /nodes/gpu-1': { status: 404, json: errorBody('not_found', message) },
    });
    show(api, 'admin');
    const card = await screen.findByRole('article', { name: 'gpu-1' });
    fireEvent.click(within(card).getByRole('button', { name: 'Remove node gpu-1…' }));
    expect(sent.some((s) => s.method === 'DELETE')).toBe(false);
    fireEvent.click(within(card).getByRole('button', { name: 'Remove gpu-1' }));
    expect((await within(card).findByRole('alert')).textContent).toBe(message);
    expect(within(screen.getByRole('article', { name: 'gpu-2' })).queryByRole('alert')).toBeNull();
    expect(sent.filter((s) => s.method === 'DELETE').map((s) => s.path)).toEqual(['/nodes/gpu-1']);
  });
});
