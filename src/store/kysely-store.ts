import { randomUUID } from 'node:crypto';

import type { Kysely, Selectable, Transaction, Updateable } from 'kysely';

import type { ModelSpec } from '../catalog/model-spec.js';
import { diffJson } from '../core/diff.js';
import { LlmgwError } from '../core/errors.js';
import { clientText } from '../core/redact.js';

import type { Dialect } from './migrations.js';
import { Cluster } from './kysely-cluster.js';
import { Fleet } from './kysely-fleet.js';
import { ModelOrigins } from './kysely-origins.js';
import { Rollouts } from './kysely-rollouts.js';
import { Scale } from './kysely-scale.js';
import { SharedValues } from './kysely-shared-values.js';
import { Usage } from './kysely-usage.js';
import { JoinTokens, Nodes } from './kysely-nodes.js';
import { isUniqueViolation, someToSet, writeAudit, type Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import { LocalWakeups, type Wakeups } from './wakeups.js';
import type {
  Actor,
  ApiKeyRecord,
  AuditView,
  AuditFilter,
  AuditRepository,
  ClusterRepository,
  FleetRepository,
  JoinTokenRepository,
  KeyLimits,
  KeyRepository,
  ModelOriginRepository,
  NodeRepository,
  RolloutRepository,
  ScaleRepository,
  SharedValueRepository,
  UsageRepository,
  ModelRepository,
  NewApiKey,
  Role,
  Store,
  StoredModel,
  UpdateOptions,
} from './store.js';

export interface KyselyStoreOptions {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Closes what the store was opened on (the pool, the file). */
  onClose: () => Promise<void>;
  now?: () => Date;
  /** How control planes wake each other; in the process unless given (PostgreSQL gives its own). */
  wakeups?: Wakeups;
}

/** The Store on Kysely; the dialect only decides row locking and how a duplicate is reported. */
export class KyselyStore implements Store {
  readonly dialect: Dialect;
  readonly models: ModelRepository;
  readonly origins: ModelOriginRepository;
  readonly keys: KeyRepository;
  readonly audit: AuditRepository;
  readonly joinTokens: JoinTokenRepository;
  readonly nodes: NodeRepository;
  readonly fleet: FleetRepository;
  readonly usage: UsageRepository;
  readonly rollouts: RolloutRepository;
  readonly scale: ScaleRepository;
  readonly cluster: ClusterRepository;
  readonly shared: SharedValueRepository;
  readonly #db: Kysely<Database>;
  readonly #options: KyselyStoreOptions;
  readonly #inTransaction: boolean;

  constructor(options: KyselyStoreOptions, db: Kysely<Database> = options.db, inTransaction = false) {
    // One set of wake-ups for the store and every transaction's view of it.
    options.wakeups ??= new LocalWakeups();
    this.dialect = options.dialect;
    this.#options = options;
    this.#db = db;
    this.#inTransaction = inTransaction;
    const ctx: Context = {
      db,
      dialect: options.dialect,
      now: () => (options.now?.() ?? new Date()).toISOString(),
      tx: (work) => this.#tx(work),
      storeOn: (trx) => new KyselyStore(options, trx, true),
    };
    this.models = new Models(ctx);
    this.origins = new ModelOrigins(ctx);
    this.keys = new Keys(ctx);
    this.audit = new Audit(ctx);
    this.joinTokens = new JoinTokens(ctx);
    this.nodes = new Nodes(ctx);
    this.fleet = new Fleet(ctx);
    this.usage = new Usage(ctx);
    this.rollouts = new Rollouts(ctx);
    this.scale = new Scale(ctx);
    this.cluster = new Cluster(ctx, options.wakeups);
    this.shared = new SharedValues(ctx);
  }

  transaction<T>(work: (tx: Store) => Promise<T>): Promise<T> {
    return this.#tx((db) => work(new KyselyStore(this.#options, db, true)));
  }

  #tx<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T> {
    if (this.#inTransaction) return work(this.#db);
    return this.#db.transaction().execute((trx: Transaction<Database>) => work(trx));
  }

  async ping(): Promise<void> {
    await this.#db.selectFrom('meta').select('key').limit(1).execute();
  }

  async close(): Promise<void> {
    await this.#options.wakeups?.close();
    await this.#options.onClose();
  }
}

function toModel(row: Selectable<Database['models']>): StoredModel {
  return {
    spec: JSON.parse(row.spec) as ModelSpec,
    version: row.version,
    created_at: row.created_at,
    created_by: row.created_by,
    updated_at: row.updated_at,
    updated_by: row.updated_by,
  };
}

class Models implements ModelRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async list(): Promise<StoredModel[]> {
    const rows = await this.#c.db.selectFrom('models').selectAll().orderBy('name').execute();
    return rows.map(toModel);
  }

  async get(name: string): Promise<StoredModel | undefined> {
    const row = await this.#c.db.selectFrom('models').selectAll().where('name', '=', name).executeTakeFirst();
    return row === undefined ? undefined : toModel(row);
  }

  create(spec: ModelSpec, actor: Actor): Promise<StoredModel> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const row = {
        name: spec.name,
        spec: JSON.stringify(spec),
        version: 1,
        created_at: at,
        created_by: actor,
        updated_at: at,
        updated_by: actor,
      };
      try {
        await db.insertInto('models').values(row).execute();
      } catch (e) {
        if (isUniqueViolation(e))
          throw new LlmgwError(
            'conflict',
            `model "${spec.name}" already exists: change it with llmgw ctl model apply -f FILE, or pick another name`,
          );
        throw e;
      }
      await writeAudit(db, {
        at,
        actor,
        action: 'model.create',
        target: `model/${spec.name}`,
        detail: { spec },
      });
      return toModel(row);
    });
  }

  update(
    name: string,
    change: (current: StoredModel) => ModelSpec,
    options: UpdateOptions,
  ): Promise<StoredModel> {
    return this.#c.tx(async (db) => {
      let query = db.selectFrom('models').selectAll().where('name', '=', name);
      // PostgreSQL: the row lock makes concurrent read-change-write cycles queue up.
      // SQLite has one writer at a time already.
      if (this.#c.dialect === 'postgres') query = query.forUpdate();
      const row = await query.executeTakeFirst();
      if (row === undefined)
        throw new LlmgwError('not_found', `model "${name}" does not exist (llmgw ctl models lists them)`);
      const current = toModel(row);
      if (options.expectVersion !== undefined && options.expectVersion !== current.version) {
        throw new LlmgwError(
          'conflict',
          `model "${name}" changed since you read it (version ${options.expectVersion}, now ${current.version}): read it again and reapply your change`,
        );
      }
      const next = change(current);
      if (next.name !== name)
        throw new LlmgwError(
          'invalid_argument',
          `a model cannot be renamed (from "${name}" to "${next.name}"): add it under the new name and remove the old one`,
        );
      const at = this.#c.now();
      const version = current.version + 1;
      await db
        .updateTable('models')
        .set({ spec: JSON.stringify(next), version, updated_at: at, updated_by: options.actor })
        .where('name', '=', name)
        .execute();
      await writeAudit(db, {
        at,
        actor: options.actor,
        action: options.action ?? 'model.update',
        target: `model/${name}`,
        detail: { version, changes: diffJson(current.spec, next) },
      });
      return { ...current, spec: next, version, updated_at: at, updated_by: options.actor };
    });
  }

  delete(name: string, actor: Actor): Promise<StoredModel> {
    return this.#c.tx(async (db) => {
      const row = await db.deleteFrom('models').where('name', '=', name).returningAll().executeTakeFirst();
      if (row === undefined)
        throw new LlmgwError('not_found', `model "${name}" does not exist (llmgw ctl models lists them)`);
      const model = toModel(row);
      await writeAudit(db, {
        at: this.#c.now(),
        actor,
        action: 'model.delete',
        target: `model/${name}`,
        detail: { spec: model.spec },
      });
      return model;
    });
  }
}

function limitsDetail(l: KeyLimits): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (l.allowed_models !== undefined) out['allowed_models'] = l.allowed_models;
  if (l.rpm !== undefined) out['rpm'] = l.rpm;
  if (l.tpm !== undefined) out['tpm'] = l.tpm;
  return out;
}

function toKey(row: Selectable<Database['api_keys']>): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    role: row.role as Role,
    prefix: row.prefix,
    created_at: row.created_at,
    created_by: row.created_by,
    revoked_at: row.revoked_at,
    revoked_by: row.revoked_by,
    last_used_at: row.last_used_at,
    allowed_models: row.allowed_models === null ? null : (JSON.parse(row.allowed_models) as string[]),
    rpm: row.rpm,
    tpm: row.tpm,
  };
}

class Keys implements KeyRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  create(key: NewApiKey, actor: Actor): Promise<ApiKeyRecord> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const row = {
        id: randomUUID(),
        name: key.name,
        role: key.role,
        secret_hash: key.secretHash,
        prefix: key.prefix,
        created_at: at,
        created_by: actor,
        revoked_at: null,
        revoked_by: null,
        last_used_at: null,
        allowed_models:
          key.allowed_models === undefined || key.allowed_models === null
            ? null
            : JSON.stringify(key.allowed_models),
        rpm: key.rpm ?? null,
        tpm: key.tpm ?? null,
      };
      try {
        await db.insertInto('api_keys').values(row).execute();
      } catch (e) {
        if (isUniqueViolation(e))
          throw new LlmgwError(
            'conflict',
            `a key named "${key.name}" already exists: revoke it first, or pick another name`,
          );
        throw e;
      }
      await writeAudit(db, {
        at,
        actor,
        action: 'key.create',
        target: `key/${key.name}`,
        detail: { role: key.role, prefix: key.prefix, ...limitsDetail(key) },
      });
      return toKey(row);
    });
  }

  async findActiveByHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('api_keys')
      .selectAll()
      .where('secret_hash', '=', secretHash)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row === undefined ? undefined : toKey(row);
  }

  async findActiveByName(name: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('api_keys')
      .selectAll()
      .where('name', '=', name)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row === undefined ? undefined : toKey(row);
  }

  async list(options: { includeRevoked?: boolean } = {}): Promise<ApiKeyRecord[]> {
    let q = this.#c.db.selectFrom('api_keys').selectAll().orderBy('name').orderBy('created_at');
    if (options.includeRevoked !== true) q = q.where('revoked_at', 'is', null);
    return (await q.execute()).map(toKey);
  }

  revoke(name: string, actor: Actor): Promise<ApiKeyRecord> {
    return this.#updateLive(name, {
      set: (at) => ({ revoked_at: at, revoked_by: actor }),
      audit: (row) => ({ actor, action: 'key.revoke', detail: { prefix: row.prefix } }),
    });
  }

  rotate(name: string, secret: { prefix: string; secretHash: string }, actor: Actor): Promise<ApiKeyRecord> {
    return this.#updateLive(name, {
      set: () => ({ secret_hash: secret.secretHash, prefix: secret.prefix }),
      audit: () => ({ actor, action: 'key.rotate', detail: { prefix: secret.prefix } }),
    });
  }

  async touch(id: string, at: string): Promise<void> {
    await this.#c.db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
  }

  setLimits(name: string, limits: KeyLimits, actor: Actor): Promise<ApiKeyRecord> {
    const set: { allowed_models?: string | null; rpm?: number | null; tpm?: number | null } = {};
    if (limits.allowed_models !== undefined)
      set.allowed_models = limits.allowed_models === null ? null : JSON.stringify(limits.allowed_models);
    if (limits.rpm !== undefined) set.rpm = limits.rpm;
    if (limits.tpm !== undefined) set.tpm = limits.tpm;
    return this.#updateLive(name, {
      set: () =>
        someToSet(set, { target: `key ${clientText(name)}`, fields: ['allowed_models', 'rpm', 'tpm'] }),
      audit: () => ({ actor, action: 'key.update', detail: limitsDetail(limits) }),
    });
  }

  /** Changes the live (unrevoked) key of that name and records it, in one transaction. */
  #updateLive(
    name: string,
    change: {
      set: (at: string) => Updateable<Database['api_keys']>;
      audit: (row: Selectable<Database['api_keys']>) => Pick<AuditView, 'actor' | 'action' | 'detail'>;
    },
  ): Promise<ApiKeyRecord> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const row = await db
        .updateTable('api_keys')
        .set(change.set(at))
        .where('name', '=', name)
        .where('revoked_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
      if (row === undefined)
        throw new LlmgwError('not_found', `no live key is named "${name}" (llmgw ctl keys lists them)`);
      await writeAudit(db, { at, target: `key/${name}`, ...change.audit(row) });
      return toKey(row);
    });
  }
}

class Audit implements AuditRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async record(entry: Omit<AuditView, 'id' | 'at'> & { at?: string }): Promise<void> {
    await writeAudit(this.#c.db, { ...entry, at: entry.at ?? this.#c.now() });
  }

  async list(filter: AuditFilter = {}): Promise<AuditView[]> {
    let q = this.#c.db
      .selectFrom('audit_log')
      .selectAll()
      .orderBy('id', 'desc')
      .limit(Math.min(filter.limit ?? 100, 1000));
    if (filter.actor !== undefined) q = q.where('actor', '=', filter.actor);
    if (filter.target !== undefined) q = q.where('target', '=', filter.target);
    if (filter.action !== undefined) q = q.where('action', '=', filter.action);
    if (filter.since !== undefined) q = q.where('at', '>=', filter.since);
    if (filter.before !== undefined) q = q.where('id', '<', filter.before);
    const rows = await q.execute();
    return rows.map((r) => ({
      id: r.id,
      at: r.at,
      actor: r.actor,
      action: r.action,
      target: r.target,
      detail: JSON.parse(r.detail) as Record<string, unknown>,
    }));
  }
}
