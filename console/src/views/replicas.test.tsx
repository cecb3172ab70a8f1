// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';

import type { Api, ReplicaView, Role } from '../api.js';
import { SessionProvider } from '../session.js';
import { Replicas } from './replicas.js';
import { errorBody, fakeApi, type Sent } from './test-api.js';

afterEach(cleanup);

const ready: ReplicaView = {
  id: 'r-1',
  model: 'qwen',
  profile: 'default',
  engine: 'vllm',
  state: 'ready',
  node: 'gpu-1',
  ready_since: new Date(Date.now() - 300_000).toISOString(),
  restarts: 1,
  endpoint: 'http://10.0.0.2:9000',
  shards: [
    {
      rank: 0,
      node: 'gpu-1',
      devices: ['1/mig1'],
      port: 9000,
      state: 'ready',
      pid: 4242,
      restarts: 1,
      last_exit: {
        code: 137,
        signal: null,
        at: new Date(Date.now() - 600_000).toISOString(),
        log_tail: ['OOM'],
      },
    },
  ],
};

const downloading: ReplicaView = {
  id: 'r-2',
  model: 'llama',
  profile: 'default',
  engine: 'llamacpp',
  state: 'downloading',
  node: 'gpu-2',
  restarts: 0,
  download: { done: 25e8, total: 1e10, rate_bps: 5e7, eta_s: 150 },
  shards: [{ rank: 0, node: 'gpu-2', devices: ['0'], port: 9001, state: 'downloading', restarts: 0 }],
};

const pending: ReplicaView = {
  id: null,
  model: 'big',
  profile: null,
  engine: 'vllm',
  state: 'pending',
  reason: 'no node has 2 free a100-80g',
  restarts: 0,
  shards: [],
};

function show(api: Api, role: Role) {
  return render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <SessionProvider session={{ api, name: 'ops', role, signOut: () => undefined }}>
        <Replicas />
      </SessionProvider>
    </QueryClientProvider>,
  );
}

const list = { 'GET /replicas': { json: { items: [ready, downloading, pending] } } };

describe('Replicas', () => {
  it('lists state and reason (a download with its progress), node, devices, restarts, ready since and endpoint', async () => {
    const { api } = fakeApi(list);
    show(api, 'user');
    const table = await screen.findByRole('table', { name: 'Replicas' });
    const cells = (name: RegExp) =>
      within(within(table).getByRole('row', { name }))
        .getAllByRole('cell')
        .map((c) => c.textContent);
    expect(cells(/^r-1 /)).toEqual([
      'qwen (default)',
      'ready',
      'gpu-1',
      '1/mig1',
      '1',
      '5m ago',
      'http://10.0.0.2:9000',
    ]);
    expect(cells(/^r-2 /)).toEqual([
      'llama (default)',
      'downloading 25%  2.5 GB of 10 GB, 50 MB/s, 3 min left',
      'gpu-2',
      '0',
      '0',
      '—',
      '—',
    ]);
    expect(screen.getByRole('progressbar', { name: 'download of r-2' }).getAttribute('value')).toBe('0.25');
    expect(cells(/^waiting/)).toEqual([
      'big (—)',
      'pendingno node has 2 free a100-80g',
      '—',
      '—',
      '0',
      '—',
      '—',
    ]);
  });

  it("shows a replica's shards; a user key gets no restart and no logs", async () => {
    const { api } = fakeApi({ ...list, 'GET /replicas/r-1': { json: ready } });
    show(api, 'user');
    fireEvent.click(await screen.findByRole('button', { name: 'Show replica r-1' }));
    const shards = await screen.findByRole('table', { name: 'Shards of replica r-1' });
    expect(
      within(within(shards).getByRole('row', { name: /^0 / }))
        .getAllByRole('cell')
        .map((c) => c.textContent)
        .slice(0, 4),
    ).toEqual(['gpu-1', '1/mig1', '9000', 'readylast exit code 137 10m agoOOM']);
    expect(screen.queryByRole('button', { name: /Restart/ })).toBeNull();
    expect(screen.queryByRole('button', { name: /Follow/ })).toBeNull();
  });

  it("shows a refused restart's message beside the buttons, then restarts in place", async () => {
    const conflict =
      'no room beside replica r-1 for the new one (no node has 1 free a100-80g-mig-3g.40gb): restart it in place with --in-place, which stops it first';
    let inPlace: unknown;
    const { api } = fakeApi({
      ...list,
      'GET /replicas/r-1': { json: ready },
      'POST /replicas/r-1/restart': (s: Sent) => {
        inPlace = (s.body as { in_place: boolean }).in_place;
        return inPlace === true
          ? Response.json({
              replica: 'r-1',
              mode: 'in-place',
              message: 'replica r-1 stopped; a new replica of qwen takes its place',
            })
          : Response.json(errorBody('conflict', conflict), { status: 409 });
      },
    });
    show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Show replica r-1' }));
    const group = await screen.findByRole('group', { name: 'Restart replica r-1' });
    fireEvent.click(within(group).getByRole('button', { name: 'Restart beside' }));
    // The server names ctl's flag; the console names its own button too.
    expect((await within(group).findByRole('alert')).textContent).toBe(
      `${conflict} (here: Restart in place)`,
    );
    expect(inPlace).toBe(false);
    fireEvent.click(within(group).getByRole('button', { name: 'Restart in place' }));
    expect((await within(group).findByRole('status')).textContent).toBe(
      'replica r-1 stopped; a new replica of qwen takes its place',
    );
    expect(inPlace).toBe(true);
    expect(within(group).queryByRole('alert')).toBeNull();
  });

  it('follows a shard log as lines arrive, and stops reading on leaving the view', async () => {
    let push: ((text: string) => void) | undefined;
    const requests: Sent[] = [];
    const { api } = fakeApi({
      ...list,
      'GET /replicas/r-1': { json: ready },
      'GET /replicas/r-1/logs': (s: Sent) => {
        requests.push(s);
        const encoder = new TextEncoder();
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            push = (t) => {
              c.enqueue(encoder.encode(t));
            };
          },
        });
        return new Response(body, { headers: { 'content-type': 'text/plain' } });
      },
    });
    const view = show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Show replica r-1' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Follow the log' }));
    await waitFor(() => {
      expect(push).toBeDefined();
    });
    expect(requests.map((r) => r.path)).toEqual(['/replicas/r-1/logs?rank=0&tail=200&follow=true']);
    act(() => {
      push?.('INFO loading mo');
    });
    act(() => {
      push?.('del\nINFO listening on :9000\n');
    });
    const log = screen.getByRole('log', { name: 'log of replica r-1 shard 0' });
    await waitFor(() => {
      expect(log.textContent).toBe('INFO loading model\nINFO listening on :9000');
    });
    expect(screen.getByRole('button', { name: 'Stop following' }).getAttribute('aria-pressed')).toBe('true');
    const signal = requests[0]?.signal;
    expect(signal?.aborted).toBe(false);
    view.unmount();
    expect(signal?.aborted).toBe(true);
  });

  it('says when a followed log ends, keeping its lines', async () => {
    const { api } = fakeApi({
      ...list,
      'GET /replicas/r-1': { json: ready },
      'GET /replicas/r-1/logs': () => new Response('--- llmgw: the engine exited with code 137\n'),
    });
    show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Show replica r-1' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Follow the log' }));
    const logs = screen.getByRole('region', { name: 'Log' });
    expect((await within(logs).findByRole('status')).textContent).toBe(
      'The log ended: the shard stopped or has not started.',
    );
    expect(within(logs).getByRole('log').textContent).toBe('--- llmgw: the engine exited with code 137');
    expect(within(logs).getByRole('button', { name: 'Follow the log' }).getAttribute('aria-pressed')).toBe(
      'false',
    );
  });

  it("shows the server's refusal of the logs beside the button", async () => {
    const message = 'no replica is named "r-1" (llmgw ctl replicas lists them)';
    const { api } = fakeApi({
      ...list,
      'GET /replicas/r-1': { json: ready },
      'GET /replicas/r-1/logs': { status: 404, json: errorBody('not_found', message) },
    });
    show(api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Show replica r-1' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Follow the log' }));
    const logs = screen.getByRole('region', { name: 'Log' });
    expect((await within(logs).findByRole('alert')).textContent).toBe(message);
    expect(within(logs).getByRole('button', { name: 'Follow the log' }).getAttribute('aria-pressed')).toBe(
      'false',
    );
  });
});
