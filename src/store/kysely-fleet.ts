import { sql, type Selectable } from 'kysely';

import { LlmgwError } from '../core/errors.js';
import type { ModelSpec } from '../catalog/model-spec.js';
import type { Shard } from '../placement/types.js';

import { writeAudit, type Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import type { Actor, FleetChange, FleetRepository, ReplicaRecord, Store } from './store.js';

function toReplica(row: Selectable<Database['replicas']>): ReplicaRecord {
  return {
    id: row.id,
    model: row.model,
    profile: row.profile,
    created_at: row.created_at,
    sealed_key: row.sealed_key,
    spec: JSON.parse(row.spec) as ModelSpec,
    retiring: row.retiring !== 0,
    retire_reason: row.retire_reason,
    retiring_since: row.retiring_since,
  };
}

function toShard(row: Selectable<Database['shards']>): Shard {
  return {
    replica: row.replica,
    model: row.model,
    profile: row.profile,
    rank: row.rank,
    ranks: row.ranks,
    node: row.node,
    devices: JSON.parse(row.devices) as number[],
    port: row.port,
    ...(row.dist_port === null ? {} : { dist_port: row.dist_port }),
    ...(row.threads === null ? {} : { threads: row.threads }),
    ...(row.memory_mib === null ? {} : { memory_mib: row.memory_mib }),
  };
}

/** The meta row that holds the check value of the secret engine keys are sealed with. */
const engineKeyCheck = 'engine_key_check';

/** A fixed key for PostgreSQL's advisory lock that serialises placement across control planes. */
const placementLockKey = 7_421_337;

export class Fleet implements FleetRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async replicas(): Promise<ReplicaRecord[]> {
    return (
      await this.#c.db.selectFrom('replicas').selectAll().orderBy('model').orderBy('created_at').execute()
    ).map(toReplica);
  }

  async shards(): Promise<Shard[]> {
    return (
      await this.#c.db.selectFrom('shards').selectAll().orderBy('replica').orderBy('rank').execute()
    ).map(toShard);
  }

  apply(change: FleetChange, actor: Actor): Promise<void> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      for (const { replica, shards } of change.add) {
        await db
          .insertInto('replicas')
          .values({ ...replica, spec: JSON.stringify(replica.spec), retiring: replica.retiring ? 1 : 0 })
          .execute();
        for (const s of shards) {
          await db
            .insertInto('shards')
            .values({
              replica: s.replica,
              rank: s.rank,
              ranks: s.ranks,
              model: s.model,
              profile: s.profile,
              node: s.node,
              devices: JSON.stringify(s.devices),
              port: s.port,
              dist_port: s.dist_port ?? null,
              threads: s.threads ?? null,
              memory_mib: s.memory_mib ?? null,
            })
            .execute();
        }
        await writeAudit(db, {
          at,
          actor,
          action: 'replica.create',
          target: `replica/${replica.id}`,
          detail: {
            model: replica.model,
            profile: replica.profile,
            placement: shards.map((s) => ({ rank: s.rank, node: s.node, devices: s.devices, port: s.port })),
          },
        });
      }
      for (const r of change.remove) {
        const gone = await db
          .selectFrom('replicas')
          .select(['model'])
          .where('id', '=', r.id)
          .executeTakeFirst();
        if (gone === undefined) continue;
        await db.deleteFrom('shards').where('replica', '=', r.id).execute();
        await db.deleteFrom('replicas').where('id', '=', r.id).execute();
        await writeAudit(db, {
          at,
          actor,
          action: 'replica.remove',
          target: `replica/${r.id}`,
          detail: { model: gone.model, reason: r.reason },
        });
      }
    });
  }

  retire(id: string, reason: string | null, actor: Actor): Promise<void> {
    return this.#c.tx(async (db) => {
      const row = await db
        .updateTable('replicas')
        .set({
          retiring: reason === null ? 0 : 1,
          retire_reason: reason,
          retiring_since: reason === null ? null : this.#c.now(),
        })
        .where('id', '=', id)
        .returning(['model'])
        .executeTakeFirst();
      if (row === undefined)
        throw new LlmgwError('not_found', `no replica is named "${id}" (llmgw ctl replicas lists them)`);
      await writeAudit(db, {
        at: this.#c.now(),
        actor,
        action: reason === null ? 'replica.keep' : 'replica.retire',
        target: `replica/${id}`,
        detail: { model: row.model, ...(reason === null ? {} : { reason }) },
      });
    });
  }

  reseal(keys: readonly { id: string; sealed_key: string }[]): Promise<void> {
    return this.#c.tx(async (db) => {
      for (const k of keys)
        await db.updateTable('replicas').set({ sealed_key: k.sealed_key }).where('id', '=', k.id).execute();
    });
  }

  keyCheck(value: string): Promise<string> {
    return this.#c.tx(async (db) => {
      await db
        .insertInto('meta')
        .values({ key: engineKeyCheck, value })
        .onConflict((oc) => oc.column('key').doNothing())
        .execute();
      const row = await db
        .selectFrom('meta')
        .select('value')
        .where('key', '=', engineKeyCheck)
        .executeTakeFirstOrThrow();
      return row.value;
    });
  }

  nextReplicaNumbers(model: string, count: number): Promise<number[]> {
    return this.#c.tx(async (db) => {
      const key = `replica_seq/${model}`;
      const row = await db.selectFrom('meta').select('value').where('key', '=', key).executeTakeFirst();
      const last = row === undefined ? 0 : Number(row.value);
      const next = last + count;
      if (row === undefined)
        await db
          .insertInto('meta')
          .values({ key, value: String(next) })
          .execute();
      else
        await db
          .updateTable('meta')
          .set({ value: String(next) })
          .where('key', '=', key)
          .execute();
      return Array.from({ length: count }, (_, i) => last + i + 1);
    });
  }

  locked<T>(work: (tx: Store) => Promise<T>): Promise<T> {
    return this.#c.tx(async (db) => {
      // SQLite's immediate transaction already holds the database's one write lock.
      if (this.#c.dialect === 'postgres')
        await sql`select pg_advisory_xact_lock(${placementLockKey})`.execute(db);
      return work(this.#c.storeOn(db));
    });
  }
}
