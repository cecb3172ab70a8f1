import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState, type ReactNode } from 'react';

import {
  queryKeys,
  type ContextChangeView,
  type ModelGpusView,
  type ModelView,
  type PlanOption,
} from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import { countRows, GPU_COUNTS, gibText, type CountAnswer, type CountRow } from './models-gpus.js';
import { gpuProfiles, rolloutText } from './models-rows.js';
import { contextField } from './plan-rows.js';

/** A modal panel: labelled by its title, focus moved in on open, Escape closes it. */
function Dialog({ title, onClose, children }: { title: string; onClose: () => void; children: ReactNode }) {
  const id = useId();
  const panel = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const back = document.activeElement as HTMLElement | null;
    panel.current?.querySelector<HTMLElement>('input, select, button')?.focus();
    return () => back?.focus();
  }, []);
  return (
    <div className="backdrop">
      <div
        ref={panel}
        role="dialog"
        aria-modal="true"
        aria-labelledby={`${id}-title`}
        className="dialog"
        onKeyDown={(e) => {
          if (e.key === 'Escape') onClose();
        }}
      >
        <h2 id={`${id}-title`}>{title}</h2>
        {children}
        <p>
          <button type="button" onClick={onClose}>
            Close
          </button>
        </p>
      </div>
    </div>
  );
}

const verdict = (r: CountRow): string => {
  switch (r.state) {
    case 'current':
      return 'now';
    case 'fits':
      return 'fits';
    case 'asking':
      return 'asking the planner…';
    case 'refused':
    case 'unchecked':
      return r.reason ?? '';
  }
};

/**
 * Cards per replica: each count checked by the server (dry_run) before anything is applied, the
 * refused ones with its reason; then POST /models/NAME/gpus, in place or beside.
 */
export function GpusDialog({ model, onClose }: { model: ModelView; onClose: () => void }) {
  const { api } = useSession();
  const client = useQueryClient();
  const id = useId();
  const profiles = gpuProfiles(model);
  const [profile, setProfile] = useState(profiles[0]);
  const current = model.profiles.find((p) => p.name === profile)?.gpus_per_node;
  const [chosen, setChosen] = useState<number | undefined>();
  const [inPlace, setInPlace] = useState(false);
  const named = profiles.length > 1 && profile !== undefined ? { profile } : {};
  const checks = useQueries({
    queries: GPU_COUNTS.filter((n) => n !== current).map((n) => ({
      queryKey: [...queryKeys.model(model.name), 'gpus', profile, n],
      enabled: profile !== undefined,
      retry: false,
      // A refusal is this count's answer, not the query's failure.
      queryFn: (): Promise<CountAnswer> =>
        api.modelGpus(model.name, { gpus: n, ...named, dry_run: true }).then(
          (check) => ({ ok: true as const, check }),
          (e: unknown) => ({ ok: false as const, message: e instanceof Error ? e.message : String(e) }),
        ),
    })),
  });
  const answers = new Map<number, CountAnswer>();
  GPU_COUNTS.filter((n) => n !== current).forEach((n, i) => {
    const a = checks[i]?.data;
    if (a !== undefined) answers.set(n, a);
  });
  const rows = countRows(current, answers);
  const apply = useMutation({
    mutationFn: (gpus: number): Promise<ModelGpusView> =>
      api.modelGpus(model.name, { gpus, ...named, in_place: inPlace }),
    onSuccess: () => void client.invalidateQueries({ queryKey: queryKeys.models }),
  });
  // No profile has cards: the server's own refusal (a dry run of one card) says why and what to do.
  const cpuOnly = useQuery({
    queryKey: [...queryKeys.model(model.name), 'gpus', 'cpu-only'],
    enabled: profile === undefined,
    retry: false,
    queryFn: () =>
      api.modelGpus(model.name, { gpus: 1, dry_run: true }).then(
        () => undefined,
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      ),
  });

  if (profile === undefined) {
    return (
      <Dialog title={`GPUs of ${model.name}`} onClose={onClose}>
        <p role="alert" className="error">
          {cpuOnly.data ?? `${model.name} runs on CPUs only: no profile has cards to change.`}
        </p>
      </Dialog>
    );
  }
  return (
    <Dialog title={`GPUs of ${model.name}`} onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (chosen !== undefined) apply.mutate(chosen);
        }}
      >
        {profiles.length > 1 && (
          <p>
            <label htmlFor={`${id}-profile`}>Profile</label>{' '}
            <select
              id={`${id}-profile`}
              value={profile}
              onChange={(e) => {
                setProfile(e.target.value);
                setChosen(undefined);
              }}
            >
              {profiles.map((p) => (
                <option key={p}>{p}</option>
              ))}
            </select>
          </p>
        )}
        <fieldset>
          <legend>Cards of one node per replica (the planner&apos;s answer for each, per card, GiB)</legend>
          <div className="table-scroll">
            <table aria-label="Cards per replica">
              <thead>
                <tr>
                  <th scope="col">Cards</th>
                  <th scope="col">Need/card</th>
                  <th scope="col">Budget</th>
                  <th scope="col">Max context</th>
                  <th scope="col">Verdict</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((r) => (
                  <tr key={r.cards} className={`count-${r.state}`}>
                    <td>
                      <label>
                        <input
                          type="radio"
                          name={`${id}-cards`}
                          value={r.cards}
                          checked={chosen === r.cards}
                          disabled={r.state === 'current' || r.state === 'refused' || r.state === 'asking'}
                          onChange={() => setChosen(r.cards)}
                        />{' '}
                        {r.cards}
                      </label>
                    </td>
                    <td>{gibText(r.need_gib)}</td>
                    <td>{gibText(r.budget_gib)}</td>
                    <td>{r.max_context ?? '-'}</td>
                    <td>{verdict(r)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </fieldset>
        <p>
          <input
            id={`${id}-in-place`}
            type="checkbox"
            checked={inPlace}
            onChange={(e) => setInPlace(e.target.checked)}
          />{' '}
          <label htmlFor={`${id}-in-place`}>
            In place: stop each replica before its successor starts (no spare cards needed, one replica down
            at a time)
          </label>
        </p>
        <button type="submit" disabled={chosen === undefined || apply.isPending}>
          {chosen === undefined ? 'Choose a count' : `Use ${chosen} card${chosen === 1 ? '' : 's'}`}
        </button>
        {apply.error !== null && (
          <p role="alert" className="error">
            {apply.error.message}
          </p>
        )}
        {apply.data !== undefined && (
          <p role="status">
            {apply.data.rollout.state === 'done'
              ? `Changed: ${apply.data.rollout.change}, no replica to restart.`
              : `Rolling: ${rolloutText(apply.data.rollout) ?? apply.data.rollout.change}`}
          </p>
        )}
      </form>
    </Dialog>
  );
}

const profileRows = (options: readonly PlanOption[] | undefined) =>
  (options ?? []).filter((o) => o.profile !== null);

/**
 * Tokens and slots: each profile's memory per card now and at the context typed (the planner,
 * GET /plan?context=), the largest context that fits; then POST /models/NAME/context.
 */
export function ContextDialog({ model, onClose }: { model: ModelView; onClose: () => void }) {
  const { api } = useSession();
  const client = useQueryClient();
  const id = useId();
  const trained = model.status.shape?.trainedContext;
  const [tokens, setTokens] = useState(
    String(model.context_length ?? (trained?.known === true ? trained.value : '')),
  );
  const [slots, setSlots] = useState('');
  const [inPlace, setInPlace] = useState(false);
  const [asked, setAsked] = useState<number | undefined>();
  const field = contextField(tokens);
  const now = useQuery({
    queryKey: queryKeys.plan({ model: model.name }),
    queryFn: () => api.plan({ model: model.name }),
    retry: false,
  });
  const then = useQuery({
    queryKey: queryKeys.plan({ model: model.name, context: asked }),
    queryFn: () => api.plan({ model: model.name, context: asked }),
    enabled: asked !== undefined,
    retry: false,
  });
  const apply = useMutation({
    mutationFn: (): Promise<ContextChangeView> =>
      api.modelContext(model.name, {
        tokens: Number(tokens),
        ...(slots.trim() === '' ? {} : { slots: Number(slots) }),
        in_place: inPlace,
      }),
    onSuccess: () => void client.invalidateQueries({ queryKey: queryKeys.models }),
  });
  const after = profileRows(then.data?.options);

  return (
    <Dialog title={`Context of ${model.name}`} onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          apply.mutate();
        }}
      >
        <p className="fields">
          <label htmlFor={`${id}-tokens`}>Tokens a request may use</label>
          <input
            id={`${id}-tokens`}
            inputMode="numeric"
            value={tokens}
            aria-invalid={!field.ok}
            onChange={(e) => setTokens(e.target.value)}
          />
          <label htmlFor={`${id}-slots`}>Slots (llama.cpp: requests at once; empty keeps them)</label>
          <input
            id={`${id}-slots`}
            inputMode="numeric"
            value={slots}
            onChange={(e) => setSlots(e.target.value)}
          />
          <button
            type="button"
            disabled={!field.ok || field.value === undefined}
            onClick={() => field.ok && setAsked(field.value)}
          >
            Check with the planner
          </button>
        </p>
        {!field.ok && (
          <p role="alert" className="error">
            {field.message}
          </p>
        )}
        <QueryError query={now} what="the planner's answer" />
        {now.data !== undefined && (
          <div className="table-scroll">
            <table aria-label="Memory per card, before and after">
              <thead>
                <tr>
                  <th scope="col">Profile</th>
                  <th scope="col">Class</th>
                  <th scope="col">Now (GiB a card)</th>
                  <th scope="col">At {asked ?? '…'} tokens</th>
                  <th scope="col">Largest context that fits</th>
                </tr>
              </thead>
              <tbody>
                {profileRows(now.data.options).map((o) => {
                  const a = after.find((x) => x.profile === o.profile && x.class === o.class);
                  return (
                    <tr key={`${o.profile}/${o.class}`}>
                      <td>{o.profile}</td>
                      <td>{o.class}</td>
                      <td>
                        {gibText(o.need_gib)} of {gibText(o.budget_gib)}
                      </td>
                      <td>
                        {a === undefined
                          ? '-'
                          : `${gibText(a.need_gib)} of ${gibText(a.budget_gib)}${a.fits ? '' : `: ${a.reason ?? 'does not fit'}`}`}
                      </td>
                      <td>{o.max_context ?? '-'}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
        {asked !== undefined && <QueryError query={then} what={`the planner's answer at ${asked} tokens`} />}
        <p>
          <input
            id={`${id}-in-place`}
            type="checkbox"
            checked={inPlace}
            onChange={(e) => setInPlace(e.target.checked)}
          />{' '}
          <label htmlFor={`${id}-in-place`}>In place: stop each replica before its successor starts</label>
        </p>
        <button type="submit" disabled={!field.ok || field.value === undefined || apply.isPending}>
          Set the context
        </button>
        {apply.error !== null && (
          <p role="alert" className="error">
            {apply.error.message}
          </p>
        )}
        {apply.data !== undefined && <ContextDone change={apply.data} />}
      </form>
    </Dialog>
  );
}

function ContextDone({ change }: { change: ContextChangeView }) {
  return (
    <div role="status">
      <p>
        Context {change.before ?? "the model's own"} → {change.after} tokens.{' '}
        {change.rollout.state === 'done'
          ? 'No replica to restart.'
          : `Rolling: ${rolloutText(change.rollout) ?? ''}`}
      </p>
      <ul>
        {change.profiles.map((p) => (
          <li key={p.profile}>
            {p.profile} on {p.class}: {p.before?.words ?? 'not counted'} → {p.after?.words ?? 'not counted'}
          </li>
        ))}
      </ul>
      {change.note !== undefined && <p className="hint">{change.note}</p>}
    </div>
  );
}
