/** The Keys view's logic: keys as table rows, and the limits form read into a request body. */
import type { KeyLimitsBody, KeyView } from '../api.js';

export interface KeyRow {
  name: string;
  role: KeyView['role'];
  prefix: string;
  models: string;
  rpm: string;
  tpm: string;
  created: string;
  createdBy: string;
  /** ISO time, or null when never used. */
  lastUsed: string | null;
  /** ISO time, or null while the key works. */
  revoked: string | null;
  revokedBy: string | null;
}

/** Working keys first (by name), then revoked ones, newest revocation first. */
export function keyRows(keys: readonly KeyView[]): KeyRow[] {
  const sorted = [...keys].sort((a, b) => {
    if ((a.revoked_at === null) !== (b.revoked_at === null)) return a.revoked_at === null ? -1 : 1;
    if (a.revoked_at !== null && b.revoked_at !== null && a.revoked_at !== b.revoked_at)
      return a.revoked_at < b.revoked_at ? 1 : -1;
    return a.name.localeCompare(b.name);
  });
  return sorted.map((k) => ({
    name: k.name,
    role: k.role,
    prefix: k.prefix,
    models: k.allowed_models === null ? 'all' : k.allowed_models.join(', '),
    rpm: k.rpm === null ? 'no limit' : String(k.rpm),
    tpm: k.tpm === null ? 'no limit' : String(k.tpm),
    created: k.created_at,
    createdBy: k.created_by,
    lastUsed: k.last_used_at,
    revoked: k.revoked_at,
    revokedBy: k.revoked_by,
  }));
}

/** The limits form as typed: empty fields mean "all models" and "no limit". */
export interface LimitsForm {
  models: string;
  rpm: string;
  tpm: string;
}

export type LimitsField = keyof LimitsForm;

export type LimitsResult =
  { ok: true; body: Required<KeyLimitsBody> } | { ok: false; errors: Partial<Record<LimitsField, string>> };

/** A key's limits as the form shows them, to edit. */
export function limitsForm(k: Pick<KeyView, 'allowed_models' | 'rpm' | 'tpm'>): LimitsForm {
  return {
    models: k.allowed_models?.join(', ') ?? '',
    rpm: k.rpm === null ? '' : String(k.rpm),
    tpm: k.tpm === null ? '' : String(k.tpm),
  };
}

function perMinute(text: string, what: string): { value: number | null } | { error: string } {
  const t = text.trim();
  if (t === '') return { value: null };
  if (!/^\d+$/.test(t) || Number(t) < 1 || !Number.isSafeInteger(Number(t)))
    return {
      error: `${what} a minute is a whole number, 1 or more (got "${t}"); leave it empty for no limit`,
    };
  return { value: Number(t) };
}

/**
 * Reads the form into the body the API takes. Every field is sent, null when empty, so that
 * clearing a field on an edit removes that limit.
 */
export function parseLimits(form: LimitsForm): LimitsResult {
  const errors: Partial<Record<LimitsField, string>> = {};
  const names = [
    ...new Set(
      form.models
        .split(/[\s,]+/)
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ];
  const rpm = perMinute(form.rpm, 'Requests');
  const tpm = perMinute(form.tpm, 'Tokens');
  if ('error' in rpm) errors.rpm = rpm.error;
  if ('error' in tpm) errors.tpm = tpm.error;
  if ('error' in rpm || 'error' in tpm) return { ok: false, errors };
  return { ok: true, body: { models: names.length === 0 ? null : names, rpm: rpm.value, tpm: tpm.value } };
}
