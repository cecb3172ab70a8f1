import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { useSearch } from 'wouter';

import { queryKeys, type PlanAnswer, type PlanAsk } from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import { classesField, contextField, PLAN_COLUMNS, planHead, planRows } from './plan-rows.js';

/**
 * The planner's table, as `llmgw ctl plan` prints it: a model of the catalog, or a source typed
 * in before adding it (admins: resolving it reads the hub), at a context and on classes asked.
 */
export function Plan() {
  const { api, role } = useSession();
  const id = useId();
  const initial = new URLSearchParams(useSearch()).get('model') ?? '';
  const models = useQuery({ queryKey: queryKeys.models, queryFn: () => api.models() });
  const [what, setWhat] = useState<'model' | 'source'>('model');
  const [model, setModel] = useState(initial);
  const [source, setSource] = useState('');
  const [context, setContext] = useState('');
  const [classes, setClasses] = useState('');
  const [ask, setAsk] = useState<PlanAsk | undefined>(initial === '' ? undefined : { model: initial });
  const [problem, setProblem] = useState<string | undefined>();
  const plan = useQuery({
    queryKey: queryKeys.plan(ask ?? {}),
    queryFn: () => api.plan(ask ?? {}),
    enabled: ask !== undefined,
    retry: false,
  });
  const chosenModel = model !== '' ? model : (models.data?.[0]?.name ?? '');

  const refusal = (c: ReturnType<typeof contextField>): string | undefined => {
    if (!c.ok) return c.message;
    if (what === 'source' && source.trim() === '')
      return 'type a source: hf://ORG/REPO, hf://ORG/REPO/FILE.gguf, a URL or a path';
    if (what === 'model' && chosenModel === '') return 'the catalog has no model: plan a source';
    return undefined;
  };
  const submit = () => {
    const c = contextField(context);
    const why = refusal(c);
    setProblem(why);
    if (why !== undefined || !c.ok) return;
    const cls = classesField(classes);
    setAsk({
      ...(what === 'model' ? { model: chosenModel } : { source: source.trim() }),
      ...(c.value === undefined ? {} : { context: c.value }),
      ...(cls.length === 0 ? {} : { classes: cls }),
    });
  };

  return (
    <section aria-labelledby="view-title" className="plan">
      <h1 id="view-title">Plan</h1>
      <p className="hint">Whether a model fits, before anything is downloaded: best first.</p>
      <form
        className="plan-form"
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        {role === 'admin' && (
          <fieldset>
            <legend>Plan</legend>
            <label>
              <input
                type="radio"
                name={`${id}-what`}
                checked={what === 'model'}
                onChange={() => setWhat('model')}
              />{' '}
              a model of the catalog
            </label>{' '}
            <label>
              <input
                type="radio"
                name={`${id}-what`}
                checked={what === 'source'}
                onChange={() => setWhat('source')}
              />{' '}
              a source, before adding it
            </label>
          </fieldset>
        )}
        {what === 'model' ? (
          <p>
            <label htmlFor={`${id}-model`}>Model</label>{' '}
            <select id={`${id}-model`} value={chosenModel} onChange={(e) => setModel(e.target.value)}>
              {(models.data ?? []).map((m) => (
                <option key={m.name}>{m.name}</option>
              ))}
            </select>
          </p>
        ) : (
          <p>
            <label htmlFor={`${id}-source`}>Source</label>{' '}
            <input
              id={`${id}-source`}
              placeholder="hf://Qwen/Qwen2.5-7B-Instruct"
              value={source}
              size={40}
              onChange={(e) => setSource(e.target.value)}
            />
          </p>
        )}
        <p>
          <label htmlFor={`${id}-context`}>Context (tokens; empty: the model&apos;s own)</label>{' '}
          <input
            id={`${id}-context`}
            inputMode="numeric"
            value={context}
            onChange={(e) => setContext(e.target.value)}
          />
        </p>
        <p>
          <label htmlFor={`${id}-classes`}>Classes (comma separated; empty: the cluster&apos;s)</label>{' '}
          <input
            id={`${id}-classes`}
            placeholder="l4-24g,a100-80g"
            value={classes}
            onChange={(e) => setClasses(e.target.value)}
          />
        </p>
        <button type="submit">Plan</button>
        {problem !== undefined && (
          <p role="alert" className="error">
            {problem}
          </p>
        )}
      </form>
      {what === 'model' && <QueryError query={models} what="the models" />}
      {ask !== undefined && <QueryError query={plan} what="the plan" />}
      {plan.data !== undefined && <PlanTable answer={plan.data} />}
    </section>
  );
}

export function PlanTable({ answer }: { answer: PlanAnswer }) {
  const head = planHead(answer);
  if (answer.options.length === 0) {
    return (
      <>
        <h2>{head}</h2>
        <p className="hint">
          No engine runs these weights on the classes asked about: original weights (safetensors) run on vLLM,
          SGLang and TensorRT-LLM, on GPUs only. Name GPU classes, or plan a GGUF file, which llama.cpp also
          runs on CPUs.
        </p>
      </>
    );
  }
  return (
    <div className="table-scroll">
      <table aria-label={head}>
        <caption>{head}</caption>
        <thead>
          <tr>
            {PLAN_COLUMNS.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {planRows(answer).map((r, i) => (
            <tr key={i} className={r.fits ? 'fits' : 'no-fit'}>
              {r.cells.slice(0, -1).map((c, j) => (
                <td key={j}>{c}</td>
              ))}
              <td>
                {r.reason !== null && r.reason !== r.short ? (
                  <details>
                    <summary>{r.short}</summary>
                    {r.reason}
                  </details>
                ) : (
                  r.short
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
