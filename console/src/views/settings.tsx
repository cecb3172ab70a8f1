import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';

import { ApiError, queryKeys, type ConfigChangeView } from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import { diffCounts, diffHunks, issueLines, lineDiff, lineRange } from './settings-diff.js';

/** What GET /config shows in place of a secret; left so, a save keeps the secret. */
const hidden = '(hidden)';

interface Draft {
  text: string;
  /** The file the edit started from, and its tag: a save is refused if the file moved on. */
  base: string;
  etag: string;
}

/** The settings file as YAML, edited here, validated by the server before it is written (admin). */
export function Settings() {
  const { api } = useSession();
  const client = useQueryClient();
  const config = useQuery({ queryKey: queryKeys.config, queryFn: () => api.getConfig() });
  const [draft, setDraft] = useState<Draft | undefined>();
  const [saved, setSaved] = useState<ConfigChangeView | undefined>();
  const editor = useRef<HTMLTextAreaElement>(null);
  const save = useMutation({
    mutationFn: (d: Draft) => api.putConfig(d.text, d.etag),
    onSuccess: (change) => {
      setSaved(change);
      setDraft(undefined);
      void client.invalidateQueries({ queryKey: queryKeys.config });
      void client.invalidateQueries({ queryKey: queryKeys.audit });
    },
  });

  if (config.data === undefined) {
    return (
      <section aria-labelledby="view-title">
        <h1 id="view-title">Settings</h1>
        <QueryError query={config} what="the settings" />
      </section>
    );
  }
  const current = config.data;
  const text = draft?.text ?? current.text;
  const base = draft?.base ?? current.text;
  const diff = lineDiff(base, text);
  const counts = diffCounts(diff);
  const changed = text !== base;
  const movedOn = draft !== undefined && draft.etag !== current.etag;
  const refusal = save.error;
  const lines = refusal instanceof ApiError ? issueLines(refusal.issues) : [];

  const goTo = (line: number) => {
    const el = editor.current;
    if (el === null) return;
    const { start, end } = lineRange(el.value, line);
    el.focus();
    el.setSelectionRange(start, end);
  };

  return (
    <section aria-labelledby="view-title" className="settings">
      <h1 id="view-title">Settings</h1>
      <p className="hint">
        {current.path === '' ? 'The settings file' : <code>{current.path}</code>}: validated by the control
        plane before it is written; nothing changes if it is refused.
        {current.text.includes(hidden) &&
          ` Secrets show as ${hidden}: left so, they are kept; write a new value to replace one.`}
      </p>
      {current.overriddenByEnv.length > 0 && (
        <p className="warning" role="note">
          Set from the environment, winning over the file: {current.overriddenByEnv.join(', ')}
        </p>
      )}
      {refusal !== null && (
        <div role="alert" className="error refusal" aria-labelledby="refusal-title">
          <p id="refusal-title">Not saved:</p>
          <pre>{refusal.message}</pre>
          {lines.length > 0 && (
            <p>
              {lines.map((l) => (
                <button
                  key={l}
                  type="button"
                  onClick={() => {
                    goTo(l);
                  }}
                >
                  Go to line {l}
                </button>
              ))}
            </p>
          )}
          {refusal instanceof ApiError && refusal.code === 'precondition_failed' && (
            <p>Your text is kept below; copy your change, then Discard to load the file as it is now.</p>
          )}
        </div>
      )}
      {movedOn && !(refusal instanceof ApiError && refusal.code === 'precondition_failed') && (
        <p className="warning" role="note">
          The settings file changed on the control plane since you started editing: saving will be refused.
          Copy your change and Discard to start from the new file.
        </p>
      )}
      {saved !== undefined && !changed && <SavedNote change={saved} />}
      <div className="editor-bar">
        <span aria-live="polite" className={changed ? 'changed' : 'hint'}>
          {changed ? `Changed: ${counts.added} added, ${counts.removed} removed lines` : 'No changes'}
        </span>
        <button
          type="button"
          className="primary"
          disabled={!changed || save.isPending}
          onClick={() => {
            if (draft !== undefined) save.mutate(draft);
          }}
        >
          {save.isPending ? 'Validating and saving…' : 'Save'}
        </button>
        <button
          type="button"
          disabled={draft === undefined}
          onClick={() => {
            setDraft(undefined);
            save.reset();
          }}
        >
          Discard
        </button>
      </div>
      <label htmlFor="settings-text" className="visually-hidden">
        Settings file (YAML)
      </label>
      <textarea
        id="settings-text"
        ref={editor}
        className="mono editor"
        spellCheck={false}
        value={text}
        rows={Math.min(40, Math.max(12, text.split('\n').length + 2))}
        onChange={(e) => {
          setSaved(undefined);
          setDraft({ text: e.target.value, base, etag: draft?.etag ?? current.etag });
        }}
      />
      {changed && (
        <details className="diff">
          <summary>Show the changes</summary>
          <pre aria-label="Changes">
            {diffHunks(diff).map((d, k) =>
              d === null ? (
                <span key={k} className="diff-gap">
                  {'…\n'}
                </span>
              ) : (
                <span key={k} className={`diff-${d.kind}`}>
                  {`${d.kind === 'added' ? '+' : d.kind === 'removed' ? '-' : ' '} ${d.text}\n`}
                </span>
              ),
            )}
          </pre>
        </details>
      )}
    </section>
  );
}

function SavedNote({ change }: { change: ConfigChangeView }) {
  if (!change.changed) return <p className="hint">Nothing to save: the file was already so.</p>;
  return (
    <div role="status" className="saved">
      <p>Settings saved.</p>
      <ul>
        {change.applied.length > 0 && <li>Applied now: {change.applied.join(', ')}</li>}
        {change.restart_required.length > 0 && (
          <li>Take effect at the next restart: {change.restart_required.join(', ')}</li>
        )}
        {change.overridden_by_env.length > 0 && (
          <li>Still set from the environment, over the file: {change.overridden_by_env.join(', ')}</li>
        )}
      </ul>
    </div>
  );
}
