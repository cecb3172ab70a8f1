// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import type { ReactNode } from 'react';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { Api, type PlanAnswer, type Role } from '../api.js';
import { App } from '../app.js';
import { SessionProvider } from '../session.js';
import { ModelList } from './models.js';
import { ModelDetail } from './models-detail.js';
import { ContextDialog, GpusDialog } from './models-dialogs.js';
import { gpusCheck, modelView } from './models-fixtures.js';
import { Plan } from './plan.js';

afterEach(cleanup);

interface Call {
  method: string;
  path: string;
  body: unknown;
}
type Answer = { status: number; body: unknown };
const ok = (body: unknown): Answer => ({ status: 200, body });
const refuse = (status: number, code: string, message: string, issues?: unknown): Answer => ({
  status,
  body: { error: { code, message, ...(issues === undefined ? {} : { issues }) } },
});

/** An Api whose fetch answers by `METHOD path` (and the JSON body), recording each call. */
function fakeApi(answer: (c: Call) => Answer | undefined): { api: Api; calls: Call[] } {
  const calls: Call[] = [];
  const api = new Api({
    key: 'k',
    fetch: (input, init) => {
      const c: Call = {
        method: init?.method ?? 'GET',
        path: (input as string).replace('/api/v1', ''),
        body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined,
      };
      calls.push(c);
      const a = answer(c) ?? refuse(404, 'not_found', `no ${c.method} ${c.path}`);
      return Promise.resolve(
        new Response(JSON.stringify(a.body), {
          status: a.status,
          headers: { 'content-type': 'application/json' },
        }),
      );
    },
  });
  return { api, calls };
}

function show(ui: ReactNode, api: Api, role: Role = 'admin') {
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <SessionProvider session={{ api, name: 'ops', role, signOut: () => undefined }}>{ui}</SessionProvider>
    </QueryClientProvider>,
  );
}

const noNode = (n: number) =>
  `no node has ${n} l4-24g cards: the nodes with that class have 2 or 4 (gpu-a 2, gpu-b 4); use one of those counts, or join a node with ${n}`;
const heads =
  'vLLM cannot spread qwen over 3 cards (tensor parallel 3): Total number of attention heads (28) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4.';

describe('GPUs… dialog', () => {
  it("shows the planner's answer for each count before applying, a refused count with the server's reason, then applies in place", async () => {
    const { api, calls } = fakeApi(({ method, path, body }) => {
      if (method !== 'POST' || path !== '/models/qwen/gpus') return undefined;
      const b = body as { gpus: number; dry_run?: boolean; in_place?: boolean };
      if (b.gpus === 3) return refuse(412, 'precondition_failed', heads);
      if (b.gpus !== 2 && b.gpus !== 4) return refuse(412, 'precondition_failed', noNode(b.gpus));
      const check = gpusCheck(1, b.gpus, b.gpus === 2 ? 9.53 : 5.51);
      if (b.dry_run === true) return ok(check);
      const { dry_run: _d, ...rest } = check;
      return ok({
        ...rest,
        rollout: {
          model: 'qwen',
          change: `gpus 1 → ${b.gpus}`,
          mode: b.in_place === true ? 'in-place' : 'surge',
          by: 'ops',
          started_at: '2026-12-03T13:00:00Z',
          state: 'rolling',
          replaced: 0,
          total: 1,
        },
      });
    });
    show(<GpusDialog model={modelView()} onClose={() => undefined} />, api);
    const dialog = screen.getByRole('dialog', { name: 'GPUs of qwen' });
    const table = within(dialog).getByRole('table', { name: 'Cards per replica' });
    const cells = (n: number) =>
      within(
        within(table)
          .getByRole('radio', { name: String(n) })
          .closest('tr') as HTMLElement,
      )
        .getAllByRole('cell')
        .map((c) => c.textContent.trim());
    await waitFor(() => {
      expect(cells(3)).toEqual(['3', '-', '-', '-', heads]);
    });
    expect(cells(1)).toEqual(['1', '17.6', '20.7', '32768', 'now']);
    expect(cells(2)).toEqual(['2', '9.5', '20.7', '32768', 'fits']);
    expect(cells(8)).toEqual(['8', '-', '-', '-', noNode(8)]);
    expect(within(table).getByRole<HTMLInputElement>('radio', { name: '3' }).disabled).toBe(true);
    // Every count but the current one was asked as a dry run, and nothing else.
    expect(calls.map((c) => (c.body as { gpus: number; dry_run: boolean }).gpus).sort()).toEqual([
      2, 3, 4, 5, 6, 7, 8,
    ]);
    expect(calls.every((c) => (c.body as { dry_run?: boolean }).dry_run === true)).toBe(true);

    fireEvent.click(within(table).getByRole('radio', { name: '2' }));
    fireEvent.click(within(dialog).getByRole('checkbox', { name: /^In place/ }));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Use 2 cards' }));
    expect((await within(dialog).findByRole('status')).textContent).toBe(
      'Rolling: gpus 1 → 2 (in-place, by ops): 0 of 1 replica running it',
    );
    expect(
      calls.filter((c) => (c.body as { dry_run?: boolean }).dry_run !== true).map((c) => c.body),
    ).toEqual([{ gpus: 2, in_place: true }]);
  });

  it("shows the server's refusal of the change itself in the dialog", async () => {
    const moved = 'model "qwen" was changed meanwhile (version 4, not 3): nothing was changed; read it again';
    const { api } = fakeApi(({ body }) => {
      const b = body as { gpus: number; dry_run?: boolean };
      if (b.dry_run === true) return ok(gpusCheck(1, b.gpus, 9.53));
      return refuse(409, 'conflict', moved);
    });
    show(<GpusDialog model={modelView()} onClose={() => undefined} />, api);
    const dialog = screen.getByRole('dialog', { name: 'GPUs of qwen' });
    const radio = within(dialog).getByRole<HTMLInputElement>('radio', { name: '4' });
    await waitFor(() => {
      expect(radio.disabled).toBe(false);
    });
    fireEvent.click(radio);
    fireEvent.click(within(dialog).getByRole('button', { name: 'Use 4 cards' }));
    expect((await within(dialog).findByRole('alert')).textContent).toBe(moved);
  });

  it("on a model with no card to change, shows the server's refusal (a dry run), changing nothing", async () => {
    const cpu =
      'model "qwen" runs on CPUs only (profile "cpu"), on no card: give it a GPU profile with a gpu_class to run it on cards (llmgw ctl model get qwen, then llmgw ctl model apply -f FILE)';
    const { api, calls } = fakeApi(() => refuse(412, 'precondition_failed', cpu));
    const base = modelView();
    const model = modelView({
      profiles: [{ ...base.profiles[0]!, name: 'cpu', engine: 'llamacpp', gpu_class: undefined, cpu: true }],
    });
    show(<GpusDialog model={model} onClose={() => undefined} />, api);
    const dialog = screen.getByRole('dialog', { name: 'GPUs of qwen' });
    await waitFor(() => {
      expect(within(dialog).getByRole('alert').textContent).toBe(cpu);
    });
    expect(calls).toEqual([{ method: 'POST', path: '/models/qwen/gpus', body: { gpus: 1, dry_run: true } }]);
    expect(within(dialog).queryByRole('radio')).toBeNull();
  });
});

const planAt = (context: number, need: number, fits: boolean, reason: string | null = null): PlanAnswer => ({
  model: 'qwen',
  context,
  options: [
    {
      profile: 'l4',
      engine: 'vllm',
      class: 'l4-24g',
      cards: 1,
      tp: 1,
      fits,
      need_gib: need,
      budget_gib: 20.69,
      weights_gib: 14.19,
      kv_gib: 1.75,
      max_context: 65536,
      reason,
    },
    // An engine's row: not one of the model's profiles, left out of the dialog.
    {
      ...{ profile: null, engine: 'sglang', class: 'l4-24g', cards: 1, tp: 1, fits: true },
      need_gib: 1,
      budget_gib: 2,
      weights_gib: 1,
      kv_gib: 0,
      max_context: 1,
      reason: null,
    },
  ],
});

describe('Context… dialog', () => {
  const tooBig =
    'profile "l4" of "qwen" would need 31.2 GiB a card on l4-24g at 131072 tokens (weights 14.2, KV 14.0), the card gives 20.7: at most 65536 tokens fit, or use more cards (llmgw ctl model gpus qwen 2)';
  it("shows memory per card now and at the tokens asked, the largest context that fits, and the refusal's reason", async () => {
    const { api, calls } = fakeApi(({ method, path }) => {
      if (path === '/plan?model=qwen') return ok(planAt(32768, 17.61, true));
      if (path === '/plan?model=qwen&context=131072')
        return ok(planAt(131072, 31.2, false, 'needs 31.2 GiB a card, the card gives 20.7'));
      if (method === 'POST' && path === '/models/qwen/context')
        return refuse(412, 'precondition_failed', tooBig);
      return undefined;
    });
    show(<ContextDialog model={modelView()} onClose={() => undefined} />, api);
    const dialog = screen.getByRole('dialog', { name: 'Context of qwen' });
    const tokens = within(dialog).getByRole<HTMLInputElement>('textbox', {
      name: 'Tokens a request may use',
    });
    expect(tokens.value).toBe('32768');
    fireEvent.change(tokens, { target: { value: '131072' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Check with the planner' }));
    const table = await within(dialog).findByRole('table', { name: 'Memory per card, before and after' });
    await waitFor(() => {
      expect(
        within(table)
          .getAllByRole('row')
          .slice(1)
          .map((r) =>
            within(r)
              .getAllByRole('cell')
              .map((c) => c.textContent),
          ),
      ).toEqual([
        ['l4', 'l4-24g', '17.6 of 20.7', '31.2 of 20.7: needs 31.2 GiB a card, the card gives 20.7', '65536'],
      ]);
    });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Set the context' }));
    expect((await within(dialog).findByRole('alert')).textContent).toBe(tooBig);
    expect(calls.at(-1)).toEqual({
      method: 'POST',
      path: '/models/qwen/context',
      body: { tokens: 131072, in_place: false },
    });
  });

  it('refuses a context that is not a number of tokens where it was typed, asking nothing', () => {
    const { api, calls } = fakeApi(() => ok(planAt(32768, 17.61, true)));
    show(<ContextDialog model={modelView()} onClose={() => undefined} />, api);
    const dialog = screen.getByRole('dialog', { name: 'Context of qwen' });
    fireEvent.change(within(dialog).getByRole('textbox', { name: 'Tokens a request may use' }), {
      target: { value: '32k' },
    });
    expect(within(dialog).getByRole('alert').textContent).toBe(
      'context is a number of tokens from 256 to 16777216, such as 32768 (got "32k")',
    );
    expect(within(dialog).getByRole<HTMLButtonElement>('button', { name: 'Set the context' }).disabled).toBe(
      true,
    );
    expect(calls.filter((c) => c.method === 'POST')).toEqual([]);
  });
});

describe('Add a model', () => {
  const yaml = `name: qwen
source: hf://Qwen/Qwen2.5-7B-Instruct
profiles:
  - name: l4
    engine: vllm
    gpu_class: l4-24
`;
  const typeIn = (text: string) => {
    fireEvent.change(screen.getByRole('textbox', { name: /^Model definition/ }), { target: { value: text } });
    fireEvent.click(screen.getByRole('button', { name: 'Add' }));
  };

  it("shows the server's validation message at the field's line, sending the YAML as JSON", async () => {
    const unknownClass = 'unknown device class "l4-24"; did you mean "l4-24g"?';
    const { api, calls } = fakeApi(({ method, path }) => {
      if (path === '/models' && method === 'GET') return ok({ items: [] });
      if (path === '/models' && method === 'POST')
        return refuse(
          400,
          'invalid_argument',
          `invalid model, nothing was changed:\nprofiles[0].gpu_class: ${unknownClass}`,
          [{ path: 'profiles[0].gpu_class', message: unknownClass }],
        );
      return undefined;
    });
    show(<ModelList />, api);
    typeIn(yaml);
    const alert = await screen.findByRole('alert');
    expect(within(alert).getByRole('listitem').textContent).toBe(
      `line 6 profiles[0].gpu_class: ${unknownClass}`,
    );
    expect(screen.getByRole('textbox', { name: /^Model definition/ }).getAttribute('aria-invalid')).toBe(
      'true',
    );
    expect(calls.at(-1)?.body).toEqual({
      name: 'qwen',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24' }],
    });
    // The line's button selects it in the text.
    fireEvent.click(within(alert).getByRole('button', { name: 'line 6' }));
    const area = screen.getByRole<HTMLTextAreaElement>('textbox', { name: /^Model definition/ });
    expect(yaml.slice(area.selectionStart, area.selectionEnd)).toBe('    gpu_class: l4-24');
  });

  it('shows a YAML error with its line, sending nothing', async () => {
    const { api, calls } = fakeApi(({ method }) => (method === 'GET' ? ok({ items: [] }) : undefined));
    show(<ModelList />, api);
    typeIn('name: a\nprofiles:\n  - name: x\n   engine: vllm\n');
    expect((await screen.findByRole('alert')).textContent).toMatch(/^Not added:line 4 /);
    expect(calls.filter((c) => c.method === 'POST')).toEqual([]);
  });

  it("shows the answer's warnings once added", async () => {
    const warning = 'profile "l4" fits no class of the cluster: no node has l4-24g';
    const { api } = fakeApi(({ method }) =>
      method === 'GET' ? ok({ items: [] }) : { status: 201, body: { ...modelView(), warnings: [warning] } },
    );
    show(<ModelList />, api);
    typeIn(yaml.replace('l4-24\n', 'l4-24g\n'));
    const status = await screen.findByRole('status');
    expect(status.textContent).toContain('Added qwen.');
    expect(status.textContent).toContain(`Warning: ${warning}`);
  });

  it('plans the definition before adding it: the table, or the issue at its line', async () => {
    const { api, calls } = fakeApi(({ method, path, body }) => {
      if (method === 'GET') return ok({ items: [] });
      if (method === 'POST' && path === '/plan') {
        const gpuClass = (body as { spec: { profiles: { gpu_class: string }[] } }).spec.profiles[0]
          ?.gpu_class;
        return gpuClass === 'l4-24g'
          ? ok(planAt(32768, 17.61, true))
          : refuse(400, 'invalid_argument', 'invalid model', [
              { path: 'profiles[0].gpu_class', message: 'unknown device class "l4-24"' },
            ]);
      }
      return undefined;
    });
    show(<ModelList />, api);
    fireEvent.change(screen.getByRole('textbox', { name: /^Model definition/ }), { target: { value: yaml } });
    fireEvent.click(screen.getByRole('button', { name: 'Plan it first' }));
    expect(within(await screen.findByRole('alert')).getByRole('listitem').textContent).toBe(
      'line 6 profiles[0].gpu_class: unknown device class "l4-24"',
    );
    fireEvent.change(screen.getByRole('textbox', { name: /^Model definition/ }), {
      target: { value: yaml.replace('l4-24\n', 'l4-24g\n') },
    });
    fireEvent.click(screen.getByRole('button', { name: 'Plan it first' }));
    expect(await screen.findByRole('table', { name: 'qwen at 32768 tokens: per card, GiB' })).toBeTruthy();
    expect(screen.queryByRole('alert')).toBeNull();
    expect(calls.filter((c) => c.path === '/models' && c.method === 'POST')).toEqual([]);
  });

  it('is not offered to a user key', async () => {
    const { api } = fakeApi(() => ok({ items: [modelView()] }));
    show(<ModelList />, api, 'user');
    await screen.findByRole('table', { name: 'The catalog' });
    expect(screen.queryByText('Add a model')).toBeNull();
  });
});

describe('a model', () => {
  it('lists the catalog with origin, shape, profiles, replicas and a rolling change', async () => {
    const rolling = modelView({
      status: {
        ...modelView().status,
        rollout: {
          model: 'qwen',
          change: 'context 8192 → 32768',
          mode: 'surge',
          by: 'admin',
          started_at: '2026-12-03T13:00:00Z',
          state: 'rolling',
          replaced: 1,
          total: 2,
        },
      },
    });
    const { api } = fakeApi(() => ok({ items: [rolling] }));
    show(<ModelList />, api, 'user');
    const table = await screen.findByRole('table', { name: 'The catalog' });
    const row = within(table).getByRole('row', { name: /^qwen/ });
    expect(
      within(row)
        .getAllByRole('cell')
        .map((c) => c.textContent),
    ).toEqual([
      'hf://Qwen/Qwen2.5-7B-Instructmain @ a09a354, 3 files, 14.0 GiB',
      'qwen2, 28 layers, 7.6B parameters, bf16, trained for 32768 tokens',
      'l4: vllm on l4-24g',
      '1',
      'context 8192 → 32768 (surge, by admin): 1 of 2 replicas running it',
    ]);
  });

  it('declared in the settings: read-only for an admin too, with the hint to edit the settings', async () => {
    const { api, calls } = fakeApi(({ path }) => {
      if (path === '/models/qwen') return ok(modelView({ metadata: { origin: 'config' } }));
      if (path === '/replicas') return ok({ items: [] });
      return undefined;
    });
    show(<ModelDetail name="qwen" />, api, 'admin');
    expect((await screen.findByText(/Declared in the settings file/)).textContent).toBe(
      'Declared in the settings file: read-only here. Change it there, with llmgw ctl config edit or in the Settings view.',
    );
    expect(screen.queryByRole('button', { name: 'GPUs…' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Context…' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Remove…' })).toBeNull();
    expect(screen.queryByRole('spinbutton', { name: 'Replicas' })).toBeNull();
    expect(calls.every((c) => c.method === 'GET')).toBe(true);
  });

  it("added through the API: an admin scales it, and a refusal shows the server's message at the form", async () => {
    const tooMany = 'replicas must be a whole number from 0 to 64 (got 100)';
    const { api } = fakeApi(({ method, path }) => {
      if (path === '/models/qwen' && method === 'GET') return ok(modelView());
      if (path === '/replicas') return ok({ items: [] });
      if (path === '/models/qwen' && method === 'PATCH') return refuse(400, 'invalid_argument', tooMany);
      return undefined;
    });
    show(<ModelDetail name="qwen" />, api, 'admin');
    const input = await screen.findByRole('spinbutton', { name: 'Replicas' });
    fireEvent.change(input, { target: { value: '100' } });
    fireEvent.click(screen.getByRole('button', { name: 'Scale' }));
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toBe(tooMany);
    expect(alert.closest('form')?.contains(input)).toBe(true);
  });

  it('removes only once confirmed', async () => {
    const { api, calls } = fakeApi(({ method, path }) => {
      if (path === '/models/qwen' && method === 'GET') return ok(modelView());
      if (path === '/replicas') return ok({ items: [] });
      if (method === 'DELETE')
        return refuse(409, 'conflict', 'model "qwen" is in use by key "team" (allowed models)');
      return undefined;
    });
    show(<ModelDetail name="qwen" />, api, 'admin');
    fireEvent.click(await screen.findByRole('button', { name: 'Remove…' }));
    expect(calls.some((c) => c.method === 'DELETE')).toBe(false);
    const confirm = screen.getByRole('group', { name: 'Remove qwen?' });
    fireEvent.click(within(confirm).getByRole('button', { name: 'Remove' }));
    expect((await screen.findByRole('alert')).textContent).toBe(
      'model "qwen" is in use by key "team" (allowed models)',
    );
  });
});

describe('Plan', () => {
  it("plans a source typed in, as ctl plan's table, a long reason whole on demand", async () => {
    const long =
      'needs 40.1 GiB a card on l4-24g (weights 35.4, KV 3.5 at 32768 tokens, overhead 1.2), the card gives 20.7 (vLLM 0.92 of 22.5): use a shorter context (at most 4096), or 2 cards';
    const { api, calls } = fakeApi(({ method, path }) => {
      if (method === 'GET' && path === '/models') return ok({ items: [modelView()] });
      if (method === 'POST' && path === '/plan') {
        const a = planAt(32768, 40.1, false, long);
        return ok({
          ...a,
          model: 'hf://Qwen/Qwen2.5-32B',
          options: a.options.slice(0, 1).map((o) => ({ ...o, profile: null })),
        });
      }
      return undefined;
    });
    show(<Plan />, api, 'admin');
    fireEvent.click(screen.getByRole('radio', { name: /a source, before adding it/ }));
    fireEvent.change(screen.getByRole('textbox', { name: 'Source' }), {
      target: { value: 'hf://Qwen/Qwen2.5-32B' },
    });
    fireEvent.change(screen.getByRole('textbox', { name: /^Context/ }), { target: { value: '32768' } });
    fireEvent.change(screen.getByRole('textbox', { name: /^Classes/ }), { target: { value: 'l4-24g' } });
    fireEvent.click(screen.getByRole('button', { name: 'Plan' }));
    const table = await screen.findByRole('table', {
      name: 'hf://Qwen/Qwen2.5-32B at 32768 tokens: per card, GiB',
    });
    expect(calls.at(-1)).toEqual({
      method: 'POST',
      path: '/plan',
      body: { source: 'hf://Qwen/Qwen2.5-32B', context: 32768, classes: ['l4-24g'] },
    });
    const cells = within(within(table).getAllByRole('row')[1] as HTMLElement).getAllByRole('cell');
    expect(cells.slice(0, 10).map((c) => c.textContent)).toEqual([
      '-',
      'vllm',
      'l4-24g',
      '1',
      'no',
      '40.1',
      '20.7',
      '14.2',
      '1.8',
      '65536',
    ]);
    const details = (cells[10] as HTMLElement).querySelector('details');
    expect(details?.querySelector('summary')?.textContent).toBe(
      'needs 40.1 GiB a card on l4-24g … of 22.5): use a shorter context (at most 4096), or 2 cards',
    );
    expect(details?.textContent).toContain(long);
  });

  it("shows the server's refusal where the table would be", async () => {
    const noClass = 'unknown device class "l4": not a class. Classes known here: a100-80g, l4-24g, cpu';
    const { api } = fakeApi(({ method, path }) => {
      if (method === 'GET' && path === '/models') return ok({ items: [modelView()] });
      if (path.startsWith('/plan?')) return refuse(400, 'invalid_argument', noClass);
      return undefined;
    });
    show(<Plan />, api, 'user');
    expect(screen.queryByRole('radio', { name: /a source/ })).toBeNull();
    await screen.findByRole('option', { name: 'qwen' });
    fireEvent.change(screen.getByRole('textbox', { name: /^Classes/ }), { target: { value: 'l4' } });
    fireEvent.click(screen.getByRole('button', { name: 'Plan' }));
    expect((await screen.findByRole('alert')).textContent).toBe(`Could not load the plan: ${noClass}`);
  });
});

describe('routes', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    sessionStorage.clear();
    history.replaceState(null, '', '/');
  });

  it("a model's page at /models/NAME, Models current in the nav, its link back to the catalog", async () => {
    sessionStorage.setItem('llmgw.key', 'llmgw_user');
    history.replaceState(null, '', '/models/qwen');
    const answers: Record<string, unknown> = {
      '/whoami': { name: 'ana', role: 'user' },
      '/models/qwen': modelView(),
      '/models': { items: [modelView()] },
      '/replicas': { items: [] },
    };
    vi.stubGlobal('fetch', (input: string) => {
      const body = answers[input.replace('/api/v1', '')];
      return Promise.resolve(
        body === undefined
          ? new Response(JSON.stringify({ error: { code: 'not_found', message: 'no' } }), { status: 404 })
          : new Response(JSON.stringify(body), { status: 200 }),
      );
    });
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <App />
      </QueryClientProvider>,
    );
    expect((await screen.findByRole('heading', { level: 1 })).textContent).toBe('qwen');
    expect(await screen.findByText('main @ a09a354, 3 files, 14.0 GiB')).toBeTruthy();
    const nav = screen.getByRole('navigation', { name: 'Views' });
    expect(within(nav).getByRole('link', { name: 'Models' }).getAttribute('aria-current')).toBe('page');
    fireEvent.click(screen.getByRole('link', { name: '← Models' }));
    const table = await screen.findByRole('table', { name: 'The catalog' });
    expect(location.pathname).toBe('/models');
    expect(within(table).getByRole('link', { name: 'qwen' }).getAttribute('href')).toBe('/models/qwen');
  });
});
