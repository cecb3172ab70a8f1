import { sql, type Kysely, type Selectable } from 'kysely';

import type { Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import {
  LeaseLost,
  type ClusterChannel,
  type ClusterRepository,
  type ControlPlaneRecord,
  type Fence,
  type LeaseRecord,
  type NodeReportRecord,
} from './store.js';
import type { Wakeups } from './wakeups.js';

function toLease(row: Selectable<Database['leases']>): LeaseRecord {
  return row;
}

/**
 * Leases, control planes and nodes' reports. Lease times come from the database's clock on
 * PostgreSQL (control planes' clocks may disagree; the database is the one referee) and
 * from this process's on SQLite (one control plane).
 */
export class Cluster implements ClusterRepository {
  readonly #c: Context;
  readonly #wakeups: Wakeups;

  constructor(c: Context, wakeups: Wakeups) {
    this.#c = c;
    this.#wakeups = wakeups;
  }

  claimLease(name: string, holder: string, ttlMs: number): Promise<{ held: boolean; lease: LeaseRecord }> {
    return this.#c.tx(async (db) => {
      const now = await this.#now(db);
      const expires = new Date(now.getTime() + ttlMs).toISOString();
      const at = now.toISOString();
      let row = await this.#locked(db, name);
      if (row === undefined) {
        // Two first claims at once: one row wins, the other reads it below.
        await db
          .insertInto('leases')
          .values({ name, holder, token: 1, since: at, expires_at: expires })
          .onConflict((oc) => oc.column('name').doNothing())
          .execute();
        row = await this.#locked(db, name);
        if (row === undefined) throw new Error(`lease ${name} could not be written`);
        return { held: row.holder === holder, lease: row };
      }
      const live = row.expires_at > at;
      if (live && row.holder !== holder) return { held: false, lease: row };
      // Renewed while live keeps the term; taken (or retaken after it lapsed) starts a new one.
      const next: LeaseRecord = live
        ? { ...row, expires_at: expires }
        : { name, holder, token: row.token + 1, since: at, expires_at: expires };
      await db
        .updateTable('leases')
        .set({ holder: next.holder, token: next.token, since: next.since, expires_at: next.expires_at })
        .where('name', '=', name)
        .execute();
      return { held: true, lease: next };
    });
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    await this.#c.tx(async (db) => {
      const now = (await this.#now(db)).toISOString();
      await db
        .updateTable('leases')
        .set({ expires_at: now })
        .where('name', '=', name)
        .where('holder', '=', holder)
        .execute();
    });
  }

  async lease(name: string): Promise<LeaseRecord | undefined> {
    const row = await this.#c.db.selectFrom('leases').selectAll().where('name', '=', name).executeTakeFirst();
    return row === undefined ? undefined : toLease(row);
  }

  checkFence(fence: Fence): Promise<void> {
    return this.#c.tx(async (db) => {
      const row = await this.#locked(db, fence.lease, 'share');
      const now = (await this.#now(db)).toISOString();
      if (row?.holder === fence.holder && row.token === fence.token && row.expires_at > now) return;
      const why =
        row === undefined
          ? 'no control plane holds it'
          : row.holder !== fence.holder || row.token !== fence.token
            ? `${row.holder} holds it now (term ${row.token}, since ${row.since})`
            : `it expired at ${row.expires_at} before this control plane renewed it`;
      throw new LeaseLost(
        `this control plane (${fence.holder}, term ${fence.token}) no longer holds the ${fence.lease} lease: ${why}; its write was refused`,
      );
    });
  }

  async announce(cp: ControlPlaneRecord): Promise<void> {
    await this.#c.db
      .insertInto('control_planes')
      .values(cp)
      .onConflict((oc) =>
        oc.column('id').doUpdateSet({ url: cp.url, version: cp.version, seen_at: cp.seen_at }),
      )
      .execute();
  }

  async controlPlanes(): Promise<ControlPlaneRecord[]> {
    return this.#c.db.selectFrom('control_planes').selectAll().orderBy('started_at').execute();
  }

  async forget(id: string): Promise<void> {
    await this.#c.db.deleteFrom('control_planes').where('id', '=', id).execute();
  }

  async putReport(record: NodeReportRecord): Promise<void> {
    const row = { node: record.node, by_cp: record.by, at: record.at, report: JSON.stringify(record.report) };
    await this.#c.db
      .insertInto('node_reports')
      .values(row)
      .onConflict((oc) => oc.column('node').doUpdateSet({ by_cp: row.by_cp, at: row.at, report: row.report }))
      .execute();
  }

  async reports(): Promise<NodeReportRecord[]> {
    const rows = await this.#c.db.selectFrom('node_reports').selectAll().orderBy('node').execute();
    return rows.map((r) => ({
      node: r.node,
      by: r.by_cp,
      at: r.at,
      report: JSON.parse(r.report) as unknown,
    }));
  }

  async removeReport(node: string): Promise<void> {
    await this.#c.db.deleteFrom('node_reports').where('node', '=', node).execute();
  }

  async putState(key: string, value: string): Promise<void> {
    await this.#c.db
      .insertInto('meta')
      .values({ key: `state.${key}`, value })
      .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
      .execute();
  }

  async state(key: string): Promise<string | undefined> {
    const row = await this.#c.db
      .selectFrom('meta')
      .select('value')
      .where('key', '=', `state.${key}`)
      .executeTakeFirst();
    return row?.value;
  }

  notify(channel: ClusterChannel, payload = ''): Promise<void> {
    return this.#wakeups.send(this.#c.db, channel, payload);
  }

  listen(channel: ClusterChannel, fn: (payload: string) => void): () => void {
    return this.#wakeups.listen(channel, fn);
  }

  async #now(db: Kysely<Database>): Promise<Date> {
    if (this.#c.dialect !== 'postgres') return new Date(this.#c.now());
    const { rows } = await sql<{ now: Date }>`select now() as now`.execute(db);
    return rows[0]?.now ?? new Date();
  }

  /** The lease's row, locked for the rest of the transaction (SQLite's write transaction locks it all). */
  async #locked(
    db: Kysely<Database>,
    name: string,
    mode: 'update' | 'share' = 'update',
  ): Promise<LeaseRecord | undefined> {
    let q = db.selectFrom('leases').selectAll().where('name', '=', name);
    if (this.#c.dialect === 'postgres') q = mode === 'update' ? q.forUpdate() : q.forShare();
    const row = await q.executeTakeFirst();
    return row === undefined ? undefined : toLease(row);
  }
}
