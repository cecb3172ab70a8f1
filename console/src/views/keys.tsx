import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type SyntheticEvent } from 'react';

import { queryKeys, type CreatedKey, type KeyView, type Role } from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import {
  keyRows,
  limitsForm,
  parseLimits,
  type KeyRow,
  type LimitsField,
  type LimitsForm,
} from './keys-rows.js';

const roleChoices: { role: Role; what: string }[] = [
  { role: 'user', what: 'user: reads, and the gateway' },
  { role: 'admin', what: 'admin: everything' },
  { role: 'gateway', what: 'gateway: for a gateway of its own' },
  { role: 'metrics', what: 'metrics: /metrics only' },
];

/** API keys: who may use the gateway and the API, with which models and limits (admin). */
export function Keys() {
  const { api } = useSession();
  const keys = useQuery({ queryKey: queryKeys.keys, queryFn: () => api.keys() });
  const [created, setCreated] = useState<CreatedKey | undefined>();

  return (
    <section aria-labelledby="view-title" className="keys">
      <h1 id="view-title">Keys</h1>
      {created === undefined ? (
        <CreateKey onCreated={setCreated} />
      ) : (
        <NewSecret
          created={created}
          onDone={() => {
            setCreated(undefined);
          }}
        />
      )}
      <article aria-labelledby="keys-title" className="card">
        <h2 id="keys-title">All keys</h2>
        <QueryError query={keys} what="the keys" />
        {keys.data && <KeyTable keys={keys.data} />}
      </article>
    </section>
  );
}

function LimitsFields({
  form,
  errors,
  onChange,
}: {
  form: LimitsForm;
  errors: Partial<Record<LimitsField, string>>;
  onChange: (f: LimitsForm) => void;
}) {
  const id = useId();
  const field = (name: LimitsField, label: string, hint: string, numeric: boolean) => (
    <div className="field">
      <label htmlFor={`${id}-${name}`}>{label}</label>
      <input
        id={`${id}-${name}`}
        value={form[name]}
        {...(numeric ? { inputMode: 'numeric' as const } : {})}
        placeholder={hint}
        aria-invalid={errors[name] !== undefined}
        aria-describedby={errors[name] === undefined ? undefined : `${id}-${name}-error`}
        onChange={(e) => {
          onChange({ ...form, [name]: e.target.value });
        }}
      />
      {errors[name] !== undefined && (
        <span id={`${id}-${name}-error`} role="alert" className="error">
          {errors[name]}
        </span>
      )}
    </div>
  );
  return (
    <>
      {field('models', 'Allowed models', 'all (or names, comma-separated)', false)}
      {field('rpm', 'Requests a minute', 'no limit', true)}
      {field('tpm', 'Tokens a minute', 'no limit', true)}
    </>
  );
}

const emptyLimits: LimitsForm = { models: '', rpm: '', tpm: '' };

function CreateKey({ onCreated }: { onCreated: (k: CreatedKey) => void }) {
  const { api } = useSession();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('user');
  const [limits, setLimits] = useState(emptyLimits);
  const [errors, setErrors] = useState<Partial<Record<LimitsField, string>>>({});
  const create = useMutation({
    mutationFn: (body: Parameters<typeof api.createKey>[0]) => api.createKey(body),
    onSuccess: (k) => {
      void client.invalidateQueries({ queryKey: queryKeys.keys });
      void client.invalidateQueries({ queryKey: queryKeys.audit });
      setName('');
      setRole('user');
      setLimits(emptyLimits);
      onCreated(k);
    },
  });
  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    const parsed = parseLimits(limits);
    if (!parsed.ok) {
      setErrors(parsed.errors);
      return;
    }
    setErrors({});
    create.mutate({ name: name.trim(), role, ...parsed.body });
  };
  return (
    <article aria-labelledby="create-title" className="card">
      <h2 id="create-title">Create a key</h2>
      <form className="form-grid" onSubmit={submit} aria-labelledby="create-title">
        <div className="field">
          <label htmlFor="key-name">Name</label>
          <input
            id="key-name"
            required
            value={name}
            placeholder="ci-bot"
            autoComplete="off"
            onChange={(e) => {
              setName(e.target.value);
            }}
          />
        </div>
        <div className="field">
          <label htmlFor="key-role">Role</label>
          <select
            id="key-role"
            value={role}
            onChange={(e) => {
              setRole(e.target.value as Role);
            }}
          >
            {roleChoices.map((r) => (
              <option key={r.role} value={r.role}>
                {r.what}
              </option>
            ))}
          </select>
        </div>
        <LimitsFields form={limits} errors={errors} onChange={setLimits} />
        <div className="actions">
          <button type="submit" disabled={create.isPending}>
            {create.isPending ? 'Creating…' : 'Create key'}
          </button>
        </div>
        {create.error !== null && (
          <p role="alert" className="error form-error">
            {create.error.message}
          </p>
        )}
      </form>
    </article>
  );
}

/** The secret, once: only its hash is kept, so leaving this panel loses it for good. */
function NewSecret({ created, onDone }: { created: CreatedKey; onDone: () => void }) {
  const [copied, setCopied] = useState<string | undefined>();
  const copy = () => {
    navigator.clipboard.writeText(created.secret).then(
      () => {
        setCopied('Copied.');
      },
      () => {
        setCopied('The browser refused to copy: select the secret and copy it by hand.');
      },
    );
  };
  return (
    <article aria-labelledby="secret-title" className="card secret">
      <h2 id="secret-title">Key {created.key.name} created</h2>
      <p className="warning" role="note">
        Copy its secret now: it will not be shown again. Only its hash is kept; a lost secret means a new key.
      </p>
      <div className="secret-row">
        <label htmlFor="new-secret" className="visually-hidden">
          Secret of key {created.key.name}
        </label>
        <input
          id="new-secret"
          readOnly
          // Focus goes to the secret, selected, ready to copy with the keyboard.
          autoFocus
          value={created.secret}
          className="mono"
          onFocus={(e) => {
            e.target.select();
          }}
        />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p aria-live="polite" className="hint">
        {copied}
      </p>
      <button type="button" onClick={onDone}>
        Done: I have copied it
      </button>
    </article>
  );
}

function When({ iso, none }: { iso: string | null; none: string }) {
  if (iso === null) return <>{none}</>;
  return <time dateTime={iso}>{new Date(iso).toLocaleString()}</time>;
}

function KeyTable({ keys }: { keys: KeyView[] }) {
  const rows = keyRows(keys);
  const { name: self } = useSession();
  if (rows.length === 0) return <p className="hint">No keys yet.</p>;
  return (
    <div className="table-scroll">
      <table aria-label="API keys">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Role</th>
            <th scope="col">Prefix</th>
            <th scope="col">Allowed models</th>
            <th scope="col">Requests/min</th>
            <th scope="col">Tokens/min</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">Revoked</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <KeyTableRow
              key={r.name}
              row={r}
              view={keys.find((k) => k.name === r.name) as KeyView}
              self={r.name === self}
            />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function KeyTableRow({ row, view, self }: { row: KeyRow; view: KeyView; self: boolean }) {
  const [open, setOpen] = useState<'edit' | 'revoke' | undefined>();
  return (
    <>
      <tr className={row.revoked === null ? undefined : 'revoked'}>
        <th scope="row">
          {row.name}
          {self && <span className="hint"> (this key)</span>}
        </th>
        <td>{row.role}</td>
        <td className="mono">{row.prefix}</td>
        <td>{row.models}</td>
        <td>{row.rpm}</td>
        <td>{row.tpm}</td>
        <td>
          <When iso={row.created} none="" /> <span className="hint">by {row.createdBy}</span>
        </td>
        <td>
          <When iso={row.lastUsed} none="never" />
        </td>
        <td>
          {row.revoked === null ? (
            'no'
          ) : (
            <>
              <When iso={row.revoked} none="" /> <span className="hint">by {row.revokedBy}</span>
            </>
          )}
        </td>
        <td>
          <div className="row-actions">
            {row.revoked === null && (
              <>
                <button
                  type="button"
                  aria-expanded={open === 'edit'}
                  aria-label={`Edit limits of ${row.name}`}
                  onClick={() => {
                    setOpen(open === 'edit' ? undefined : 'edit');
                  }}
                >
                  Limits…
                </button>
                <button
                  type="button"
                  aria-expanded={open === 'revoke'}
                  aria-label={`Revoke ${row.name}`}
                  onClick={() => {
                    setOpen(open === 'revoke' ? undefined : 'revoke');
                  }}
                >
                  Revoke…
                </button>
              </>
            )}
          </div>
        </td>
      </tr>
      {open !== undefined && (
        <tr className="row-panel">
          <td colSpan={10}>
            {open === 'edit' ? (
              <EditLimits
                view={view}
                onClose={() => {
                  setOpen(undefined);
                }}
              />
            ) : (
              <ConfirmRevoke
                name={row.name}
                onClose={() => {
                  setOpen(undefined);
                }}
              />
            )}
          </td>
        </tr>
      )}
    </>
  );
}

function EditLimits({ view, onClose }: { view: KeyView; onClose: () => void }) {
  const { api } = useSession();
  const client = useQueryClient();
  const [form, setForm] = useState(() => limitsForm(view));
  const [errors, setErrors] = useState<Partial<Record<LimitsField, string>>>({});
  const save = useMutation({
    mutationFn: (body: Parameters<typeof api.updateKey>[1]) => api.updateKey(view.name, body),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: queryKeys.keys });
      void client.invalidateQueries({ queryKey: queryKeys.audit });
      onClose();
    },
  });
  return (
    <form
      className="form-grid"
      aria-label={`Limits of ${view.name}`}
      onSubmit={(e) => {
        e.preventDefault();
        const parsed = parseLimits(form);
        if (!parsed.ok) {
          setErrors(parsed.errors);
          return;
        }
        setErrors({});
        save.mutate(parsed.body);
      }}
    >
      <LimitsFields form={form} errors={errors} onChange={setForm} />
      <div className="actions">
        <button type="submit" disabled={save.isPending}>
          Save limits
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
      {save.error !== null && (
        <p role="alert" className="error form-error">
          {save.error.message}
        </p>
      )}
    </form>
  );
}

function ConfirmRevoke({ name, onClose }: { name: string; onClose: () => void }) {
  const { api } = useSession();
  const client = useQueryClient();
  const revoke = useMutation({
    mutationFn: () => api.revokeKey(name),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: queryKeys.keys });
      void client.invalidateQueries({ queryKey: queryKeys.audit });
      onClose();
    },
  });
  return (
    <div
      className="confirm"
      role="group"
      aria-label={`Revoke ${name}`}
      onKeyDown={(e) => {
        if (e.key === 'Escape') onClose();
      }}
    >
      <p>
        Revoke key <strong>{name}</strong>? Whatever uses it is refused from now on; this cannot be undone.
      </p>
      <div className="actions">
        <button
          type="button"
          className="danger"
          disabled={revoke.isPending}
          onClick={() => {
            revoke.mutate();
          }}
        >
          Revoke {name}
        </button>
        {/* Focus on the safe choice: Enter on a confirmation that just opened cancels. */}
        <button type="button" autoFocus onClick={onClose}>
          Cancel
        </button>
      </div>
      {revoke.error !== null && (
        <p role="alert" className="error">
          {revoke.error.message}
        </p>
      )}
    </div>
  );
}
