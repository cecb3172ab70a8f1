import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useRef, useState } from 'react';
import { Link, useRoute } from 'wouter';

import {
  ApiError,
  queryKeys,
  type ModelChange,
  type ModelRead,
  type ModelUseView,
  type ModelView,
  type PlanAnswer,
} from '../api.js';
import { QueryError } from '../query-error.js';
import { AdminOnly, useSession } from '../session.js';
import { ModelDetail } from './models-detail.js';
import { UseCatalog } from './models-use.js';
import { isModelView } from '../../../src/protocol/model-views.js';
import { isDeclared, originText, profileText, rolloutText, shapeText } from './models-rows.js';
import { parseModelYaml, placeIssues, type PlacedIssue } from './models-yaml.js';
import { PlanTable } from './plan.js';

/** The catalog at /models, a model's page at /models/NAME (the route is nested: see app.tsx). */
export function Models() {
  const [detail, params] = useRoute<{ name: string }>('/:name');
  return detail ? <ModelDetail name={decodeURIComponent(params.name)} /> : <ModelList />;
}

export function ModelList() {
  const { api } = useSession();
  const models = useQuery({ queryKey: queryKeys.models, queryFn: () => api.models() });
  return (
    <section aria-labelledby="view-title" className="models">
      <h1 id="view-title">Models</h1>
      <QueryError query={models} what="the models" />
      {models.data?.length === 0 && <p className="hint">The catalog is empty.</p>}
      {models.data !== undefined && models.data.length > 0 && <AnyCatalog models={models.data} />}
      <AdminOnly>
        <AddModel />
      </AdminOnly>
    </section>
  );
}

/** The admin's catalog, or the one a key that is not admin reads (no sources, files or profiles). */
function AnyCatalog({ models }: { models: ModelRead[] }) {
  const full = models.filter(isModelView);
  return full.length === models.length ? (
    <Catalog models={full} />
  ) : (
    <UseCatalog models={models.filter((m): m is ModelUseView => !isModelView(m))} />
  );
}

function Catalog({ models }: { models: ModelView[] }) {
  return (
    <div className="table-scroll">
      <table aria-label="The catalog">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Origin</th>
            <th scope="col">Shape</th>
            <th scope="col">Profiles</th>
            <th scope="col">Replicas</th>
            <th scope="col">Change</th>
          </tr>
        </thead>
        <tbody>
          {models.map((m) => (
            <tr key={m.name}>
              <th scope="row">
                <Link href={`/${encodeURIComponent(m.name)}`}>{m.name}</Link>
                {isDeclared(m) && <span className="badge"> declared</span>}
              </th>
              <td>
                <code>{m.source}</code>
                <br />
                <span className="hint">{originText(m)}</span>
              </td>
              <td>{shapeText(m)}</td>
              <td>
                <ul className="plain">
                  {m.profiles.map((p) => (
                    <li key={p.name}>{profileText(p)}</li>
                  ))}
                </ul>
              </td>
              <td>{m.replicas}</td>
              <td>{rolloutText(m.status.rollout) ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const example = `name: qwen-7b
source: hf://Qwen/Qwen2.5-7B-Instruct
replicas: 1
profiles:
  - name: l4
    engine: vllm
    gpu_class: l4-24g
`;

/** Offsets of a 1-based line in the text, to select it in the text area. */
function lineRange(text: string, line: number): [number, number] {
  const lines = text.split('\n');
  const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
  return [start, start + (lines[line - 1]?.length ?? 0)];
}

/** Adds a model from YAML (as `ctl model add -f`): parsed here, validated by the server, its issues at their lines. */
export function AddModel() {
  const { api } = useSession();
  const client = useQueryClient();
  const id = useId();
  const area = useRef<HTMLTextAreaElement>(null);
  const [text, setText] = useState(example);
  const [problems, setProblems] = useState<PlacedIssue[]>([]);
  const [added, setAdded] = useState<ModelChange | undefined>();
  const [planned, setPlanned] = useState<PlanAnswer | undefined>();
  // The server's issues per field, at their lines; the message alone when it has none.
  const refused = (e: Error) => {
    setProblems(
      e instanceof ApiError && e.issues.length > 0
        ? placeIssues(text, e.issues)
        : [{ path: '', message: e.message }],
    );
  };
  const add = useMutation({
    mutationFn: (spec: unknown) => api.addModel(spec),
    onSuccess: (m) => {
      setAdded(m);
      void client.invalidateQueries({ queryKey: queryKeys.models });
    },
    onError: refused,
  });
  // The definition planned as it stands (POST /plan {spec}), before adding it.
  const plan = useMutation({
    mutationFn: (spec: unknown) => api.plan({ spec }),
    onSuccess: setPlanned,
    onError: refused,
  });
  const submit = (planOnly = false) => {
    setAdded(undefined);
    setPlanned(undefined);
    const parsed = parseModelYaml(text);
    if (!parsed.ok) {
      setProblems([
        { path: '', message: parsed.message, ...(parsed.line === undefined ? {} : { line: parsed.line }) },
      ]);
      return;
    }
    setProblems([]);
    if (planOnly) plan.mutate(parsed.value);
    else add.mutate(parsed.value);
  };
  const goTo = (line: number) => {
    const el = area.current;
    if (el === null) return;
    el.focus();
    el.setSelectionRange(...lineRange(text, line));
  };
  const invalid = problems.length > 0;

  return (
    <details className="add-model card">
      <summary>Add a model</summary>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <label htmlFor={`${id}-yaml`}>Model definition (YAML, as llmgw ctl model add -f takes it)</label>
        <textarea
          id={`${id}-yaml`}
          ref={area}
          rows={14}
          spellCheck={false}
          value={text}
          aria-invalid={invalid}
          aria-describedby={invalid ? `${id}-problems` : undefined}
          onChange={(e) => {
            setText(e.target.value);
          }}
        />
        {invalid && (
          <div id={`${id}-problems`} role="alert" className="error">
            <p>
              {problems.length === 1 && problems[0]?.path === ''
                ? 'Not added:'
                : 'Not added; nothing was changed:'}
            </p>
            <ul>
              {problems.map((p, i) => (
                <li key={i}>
                  {p.line !== undefined && (
                    <button type="button" className="link" onClick={() => goTo(p.line ?? 1)}>
                      line {p.line}
                    </button>
                  )}{' '}
                  {p.path !== '' && <code>{p.path}</code>}
                  {p.path !== '' ? ': ' : ''}
                  {p.message}
                </li>
              ))}
            </ul>
          </div>
        )}
        <button type="submit" disabled={add.isPending}>
          {add.isPending ? 'Adding…' : 'Add'}
        </button>{' '}
        <button type="button" disabled={plan.isPending} onClick={() => submit(true)}>
          {plan.isPending ? 'Planning…' : 'Plan it first'}
        </button>
      </form>
      {planned !== undefined && <PlanTable answer={planned} />}
      {added !== undefined && (
        <div role="status">
          <p>
            Added <Link href={`/${encodeURIComponent(added.name)}`}>{added.name}</Link>.
          </p>
          {added.warnings !== undefined && (
            <ul className="warnings">
              {added.warnings.map((w) => (
                <li key={w}>Warning: {w}</li>
              ))}
            </ul>
          )}
        </div>
      )}
    </details>
  );
}
