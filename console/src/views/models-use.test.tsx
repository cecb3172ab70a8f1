// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, render, screen, within } from '@testing-library/react';
import type { ReactNode } from 'react';
import { afterEach, describe, expect, it } from 'vitest';

import type { Api, ModelUseView } from '../api.js';
import { SessionProvider } from '../session.js';
import { ModelList } from './models.js';
import { ModelDetail } from './models-detail.js';
import { fakeApi } from './test-api.js';

afterEach(cleanup);

function show(ui: ReactNode, api: Api) {
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <SessionProvider session={{ api, name: 'dev', role: 'user', signOut: () => undefined }}>
        {ui}
      </SessionProvider>
    </QueryClientProvider>,
  );
}

const chat: ModelUseView = {
  name: 'chat',
  state: 'ready',
  ready_replicas: 2,
  context_length: 8192,
  adapters: ['sql'],
};
const sleepy: ModelUseView = { name: 'sleepy', state: 'scaled_to_zero', ready_replicas: 0, adapters: [] };

describe('the catalog as a user key reads it (what a client needs, no source)', () => {
  it('lists each model with its state, ready replicas, context and adapters', async () => {
    const { api } = fakeApi({ 'GET /models': { json: { items: [chat, sleepy] } } });
    show(<ModelList />, api);
    const table = await screen.findByRole('table', { name: 'The catalog' });
    expect(
      within(table)
        .getAllByRole('row')
        .map((r) => r.textContent),
    ).toEqual([
      'NameStateReadyContextAdapters',
      'chatready28192 tokenschat:sql',
      "sleepyscaled to zero0the model's own",
    ]);
    expect(screen.queryByText('Add a model')).toBeNull();
  });

  it("shows one model's facts and replicas, with no origin, files or profiles", async () => {
    const { api } = fakeApi({
      'GET /models/chat': { json: { ...chat, max_output: 1024 } },
      'GET /replicas': { json: { items: [] } },
    });
    show(<ModelDetail name="chat" />, api);
    const dl = await screen.findByLabelText('The model');
    expect(dl.textContent).toBe(
      'StatereadyReady replicas2Context8192 tokens, at most 1024 outAdapterschat:sql',
    );
    expect(await screen.findByText('No replica.')).toBeTruthy();
    expect(screen.queryByRole('heading', { name: 'Origin' })).toBeNull();
    expect(screen.queryByRole('heading', { name: 'Profiles' })).toBeNull();
  });
});
