import { sql, type Kysely, type Migration } from 'kysely';

export type Dialect = 'sqlite' | 'postgres';

/**
 * Versioned schema changes, applied in name order at start. Never edit one that has
 * shipped: add the next. Each takes the dialect for the few types that differ.
 */
export function migrations(dialect: Dialect): Record<string, Migration> {
  const autoId = (db: Kysely<unknown>, table: string) =>
    dialect === 'postgres'
      ? db.schema
          .createTable(table)
          .addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
      : db.schema.createTable(table).addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());

  return {
    '0001_catalog_keys_audit': {
      async up(db) {
        await db.schema
          .createTable('meta')
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('models')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('spec', 'text', (c) => c.notNull())
          .addColumn('version', 'integer', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addColumn('updated_by', 'text', (c) => c.notNull())
          .execute();
        await autoId(db, 'audit_log')
          .addColumn('at', 'text', (c) => c.notNull())
          .addColumn('actor', 'text', (c) => c.notNull())
          .addColumn('action', 'text', (c) => c.notNull())
          .addColumn('target', 'text', (c) => c.notNull())
          .addColumn('detail', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute();
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('role', 'text', (c) => c.notNull())
          .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('revoked_at', 'text')
          .addColumn('revoked_by', 'text')
          .addColumn('last_used_at', 'text')
          .execute();
        // A name belongs to one live key; revoked ones keep theirs for the audit trail.
        await db.schema
          .createIndex('api_keys_live_name')
          .on('api_keys')
          .column('name')
          .unique()
          .where(sql.ref('revoked_at'), 'is', null)
          .execute();
      },
    },
    '0002_nodes_and_join_tokens': {
      async up(db) {
        await db.schema
          .createTable('join_tokens')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text')
          .addColumn('revoked_at', 'text')
          .addColumn('revoked_by', 'text')
          .addColumn('last_used_at', 'text')
          .addColumn('uses', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema
          .createIndex('join_tokens_live_name')
          .on('join_tokens')
          .column('name')
          .unique()
          .where(sql.ref('revoked_at'), 'is', null)
          .execute();
        await db.schema
          .createTable('nodes')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull().unique())
          .addColumn('secret_hash', 'text', (c) => c.notNull())
          .addColumn('joined_at', 'text', (c) => c.notNull())
          .addColumn('joined_with', 'text', (c) => c.notNull())
          .addColumn('address', 'text', (c) => c.notNull())
          .addColumn('agent_version', 'text', (c) => c.notNull())
          .addColumn('inventory', 'text', (c) => c.notNull())
          .addColumn('inventory_at', 'text', (c) => c.notNull())
          .addColumn('last_seen_at', 'text', (c) => c.notNull())
          .execute();
      },
    },
    '0003_replicas_and_shards': {
      async up(db) {
        await db.schema
          .createTable('replicas')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('profile', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('engine_key', 'text', (c) => c.notNull())
          .addColumn('spec', 'text', (c) => c.notNull())
          .addColumn('retiring', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('retire_reason', 'text')
          .execute();
        await db.schema.createIndex('replicas_model').on('replicas').column('model').execute();
        await db.schema
          .createTable('shards')
          .addColumn('replica', 'text', (c) => c.notNull().references('replicas.id').onDelete('cascade'))
          .addColumn('rank', 'integer', (c) => c.notNull())
          .addColumn('ranks', 'integer', (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('profile', 'text', (c) => c.notNull())
          .addColumn('node', 'text', (c) => c.notNull())
          .addColumn('devices', 'text', (c) => c.notNull())
          .addColumn('port', 'integer', (c) => c.notNull())
          .addColumn('dist_port', 'integer')
          .addColumn('threads', 'integer')
          .addColumn('memory_mib', 'integer')
          .addPrimaryKeyConstraint('shards_pk', ['replica', 'rank'])
          .execute();
        await db.schema.createIndex('shards_node').on('shards').column('node').execute();
      },
    },
    '0004_key_limits_and_usage': {
      async up(db) {
        await db.schema.alterTable('api_keys').addColumn('allowed_models', 'text').execute();
        await db.schema.alterTable('api_keys').addColumn('rpm', 'integer').execute();
        await db.schema.alterTable('api_keys').addColumn('tpm', 'integer').execute();
        await db.schema
          .createTable('usage')
          .addColumn('key_name', 'text', (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('hour', 'text', (c) => c.notNull())
          .addColumn('requests', 'bigint', (c) => c.notNull())
          .addColumn('prompt_tokens', 'bigint', (c) => c.notNull())
          .addColumn('completion_tokens', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('usage_pk', ['key_name', 'model', 'hour'])
          .execute();
        await db.schema.createIndex('usage_hour').on('usage').column('hour').execute();
      },
    },
    // Engine keys are kept sealed from here on; the control plane seals those stored before
    // at its next start (it holds the secret, the migration does not). The new name makes
    // an older llmgw refuse this database rather than hand sealed text to engines as keys.
    // A replica being replaced records since when, so that only replicas made since count
    // as its successors.
    '0005_sealed_engine_keys': {
      async up(db) {
        await db.schema.alterTable('replicas').renameColumn('engine_key', 'sealed_key').execute();
        await db.schema.alterTable('replicas').addColumn('retiring_since', 'text').execute();
      },
    },
    // What each model's source resolved to, for models added through the API and declared in
    // the settings alike (those are not in `models`), so keyed by name alone.
    '0006_model_origins': {
      async up(db) {
        await db.schema
          .createTable('model_origins')
          .addColumn('model', 'text', (c) => c.primaryKey())
          .addColumn('source', 'text', (c) => c.notNull())
          .addColumn('origin', 'text')
          .addColumn('shape', 'text')
          .addColumn('problem', 'text')
          .addColumn('resolved_at', 'text', (c) => c.notNull())
          .execute();
      },
    },
    // Each model's latest rolling change, so that a roll in place goes on after a restart
    // and a failed one stays reported (keyed by name: declared models have no `models` row).
    '0007_rollouts': {
      async up(db) {
        await db.schema
          .createTable('rollouts')
          .addColumn('model', 'text', (c) => c.primaryKey())
          .addColumn('change', 'text', (c) => c.notNull())
          .addColumn('mode', 'text', (c) => c.notNull())
          .addColumn('by_actor', 'text', (c) => c.notNull())
          .addColumn('spec', 'text', (c) => c.notNull())
          .addColumn('replica', 'text')
          .addColumn('started_at', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('finished_at', 'text')
          .addColumn('error', 'text')
          .execute();
      },
    },
    // How many replicas a rollout restarts, counted when it starts (0: none ran what changed).
    '0008_rollout_replaces': {
      async up(db) {
        await db.schema
          .alterTable('rollouts')
          .addColumn('replaces', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    // Several control planes: who leads (a lease with a fencing token), who serves, and what
    // each node last reported, so every control plane routes to every ready replica.
    '0009_cluster': {
      async up(db) {
        await db.schema
          .createTable('leases')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('holder', 'text', (c) => c.notNull())
          .addColumn('token', 'bigint', (c) => c.notNull())
          .addColumn('since', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('control_planes')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('version', 'text', (c) => c.notNull())
          .addColumn('started_at', 'text', (c) => c.notNull())
          .addColumn('seen_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('node_reports')
          .addColumn('node', 'text', (c) => c.primaryKey())
          .addColumn('by_cp', 'text', (c) => c.notNull())
          .addColumn('at', 'text', (c) => c.notNull())
          .addColumn('report', 'text', (c) => c.notNull())
          .execute();
      },
    },
    // Autoscaled models: the count the autoscaler set and the decision that set it, with the
    // last request and cold start seen, so that a restart (or a new leader) goes on from there.
    '0010_model_scale': {
      async up(db) {
        await db.schema
          .createTable('model_scale')
          .addColumn('model', 'text', (c) => c.primaryKey())
          .addColumn('replicas', 'integer', (c) => c.notNull())
          .addColumn('decision', 'text')
          .addColumn('decided_at', 'text')
          .addColumn('last_request_at', 'text')
          .addColumn('cold_start_ms', 'integer')
          .addColumn('cold_start_at', 'text')
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .execute();
      },
    },
    // Each profile's replicas when a rollout started, so that a roll in place starts each
    // successor on its predecessor's profile after that one stopped (JSON; null before).
    '0011_rollout_profiles': {
      async up(db) {
        await db.schema.alterTable('rollouts').addColumn('profiles', 'text').execute();
      },
    },
  };
}
