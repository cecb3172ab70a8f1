import { randomUUID } from 'node:crypto';

import type { Kysely, Selectable } from 'kysely';

import { LlmgwError } from '../core/errors.js';
import type { NodeInventory } from '../gpu/types.js';

import { isUniqueViolation, writeAudit, type Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import type { Actor, JoinTokenRecord, JoinTokenRepository, NodeRecord, NodeRepository } from './store.js';

function toToken(row: Selectable<Database['join_tokens']>): JoinTokenRecord {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    created_at: row.created_at,
    created_by: row.created_by,
    expires_at: row.expires_at,
    revoked_at: row.revoked_at,
    revoked_by: row.revoked_by,
    last_used_at: row.last_used_at,
    uses: row.uses,
  };
}

export class JoinTokens implements JoinTokenRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  create(
    token: { name: string; prefix: string; secretHash: string; expiresAt: string | null },
    actor: Actor,
  ): Promise<JoinTokenRecord> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const row = {
        id: randomUUID(),
        name: token.name,
        secret_hash: token.secretHash,
        prefix: token.prefix,
        created_at: at,
        created_by: actor,
        expires_at: token.expiresAt,
        revoked_at: null,
        revoked_by: null,
        last_used_at: null,
        uses: 0,
      };
      try {
        await db.insertInto('join_tokens').values(row).execute();
      } catch (e) {
        if (isUniqueViolation(e))
          throw new LlmgwError(
            'conflict',
            `a join token named "${token.name}" already exists: revoke it first, or pick another name`,
          );
        throw e;
      }
      await writeAudit(db, {
        at,
        actor,
        action: 'token.create',
        target: `token/${token.name}`,
        detail: { prefix: token.prefix, expires_at: token.expiresAt },
      });
      return toToken(row);
    });
  }

  async findByHash(secretHash: string): Promise<JoinTokenRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('join_tokens')
      .selectAll()
      .where('secret_hash', '=', secretHash)
      .executeTakeFirst();
    return row === undefined ? undefined : toToken(row);
  }

  async list(options: { includeRevoked?: boolean } = {}): Promise<JoinTokenRecord[]> {
    let q = this.#c.db.selectFrom('join_tokens').selectAll().orderBy('created_at');
    if (options.includeRevoked !== true) q = q.where('revoked_at', 'is', null);
    return (await q.execute()).map(toToken);
  }

  revoke(name: string, actor: Actor): Promise<JoinTokenRecord> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const row = await db
        .updateTable('join_tokens')
        .set({ revoked_at: at, revoked_by: actor })
        .where('name', '=', name)
        .where('revoked_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
      if (row === undefined)
        throw new LlmgwError(
          'not_found',
          `no live join token is named "${name}" (llmgw ctl node tokens lists them)`,
        );
      await writeAudit(db, {
        at,
        actor,
        action: 'token.revoke',
        target: `token/${name}`,
        detail: { prefix: row.prefix },
      });
      return toToken(row);
    });
  }

  async noteUse(id: string, at: string): Promise<void> {
    await this.#c.db
      .updateTable('join_tokens')
      .set((eb) => ({ last_used_at: at, uses: eb('uses', '+', 1) }))
      .where('id', '=', id)
      .execute();
  }
}

function toNode(row: Omit<Selectable<Database['nodes']>, 'secret_hash'>): NodeRecord {
  return {
    id: row.id,
    name: row.name,
    joined_at: row.joined_at,
    joined_with: row.joined_with,
    address: row.address,
    agent_version: row.agent_version,
    inventory: JSON.parse(row.inventory) as NodeInventory,
    inventory_at: row.inventory_at,
    last_seen_at: row.last_seen_at,
  };
}

const nodeColumns = [
  'id',
  'name',
  'joined_at',
  'joined_with',
  'address',
  'agent_version',
  'inventory',
  'inventory_at',
  'last_seen_at',
] as const;

export type NodeJoin = Omit<NodeRecord, 'joined_at' | 'inventory_at' | 'last_seen_at'> & {
  secretHash: string;
  tokenId: string;
};

/**
 * Why a node may not join, checked inside the join's transaction (a revocation that landed
 * after the caller looked must still win), else its token's name.
 */
async function joinRefusal(db: Kysely<Database>, node: NodeJoin): Promise<LlmgwError | { name: string }> {
  const token = await db
    .selectFrom('join_tokens')
    .select(['name', 'revoked_at'])
    .where('id', '=', node.tokenId)
    .executeTakeFirst();
  if (token === undefined || token.revoked_at !== null)
    return new LlmgwError(
      'unauthenticated',
      'the join token was revoked: make a new one with llmgw ctl node token',
    );
  const byName = await db.selectFrom('nodes').select(['id']).where('name', '=', node.name).executeTakeFirst();
  if (byName !== undefined && byName.id !== node.id) {
    return new LlmgwError(
      'conflict',
      `a node named "${node.name}" has already joined with another identity: remove it first (llmgw ctl node rm ${node.name}) or start this agent with --name OTHER`,
    );
  }
  return { name: token.name };
}

/** Writes a join (or a join again with a new credential), counts the token's use and audits it. */
async function writeJoin(
  db: Kysely<Database>,
  node: NodeJoin,
  tokenName: string,
  at: string,
): Promise<NodeRecord> {
  const row = {
    id: node.id,
    name: node.name,
    secret_hash: node.secretHash,
    joined_at: at,
    joined_with: node.joined_with,
    address: node.address,
    agent_version: node.agent_version,
    inventory: JSON.stringify(node.inventory),
    inventory_at: at,
    last_seen_at: at,
  };
  const existing = await db.selectFrom('nodes').select('id').where('id', '=', node.id).executeTakeFirst();
  try {
    if (existing === undefined) await db.insertInto('nodes').values(row).execute();
    else await db.updateTable('nodes').set(row).where('id', '=', node.id).execute();
  } catch (e) {
    if (isUniqueViolation(e))
      throw new LlmgwError(
        'conflict',
        `a node named "${node.name}" joined at the same moment: start this agent with --name OTHER`,
      );
    throw e;
  }
  await db
    .updateTable('join_tokens')
    .set((eb) => ({ last_used_at: at, uses: eb('uses', '+', 1) }))
    .where('id', '=', node.tokenId)
    .execute();
  await writeAudit(db, {
    at,
    actor: `token/${tokenName}`,
    action: existing === undefined ? 'node.join' : 'node.rejoin',
    target: `node/${node.name}`,
    detail: { id: node.id, address: node.address },
  });
  return toNode(row);
}

export class Nodes implements NodeRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async list(): Promise<NodeRecord[]> {
    return (await this.#c.db.selectFrom('nodes').select(nodeColumns).orderBy('name').execute()).map(toNode);
  }

  async get(id: string): Promise<NodeRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('nodes')
      .select(nodeColumns)
      .where('id', '=', id)
      .executeTakeFirst();
    return row === undefined ? undefined : toNode(row);
  }

  async getByName(name: string): Promise<NodeRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('nodes')
      .select(nodeColumns)
      .where('name', '=', name)
      .executeTakeFirst();
    return row === undefined ? undefined : toNode(row);
  }

  async findCredential(id: string): Promise<{ secretHash: string } | undefined> {
    const row = await this.#c.db
      .selectFrom('nodes')
      .select('secret_hash')
      .where('id', '=', id)
      .executeTakeFirst();
    return row === undefined ? undefined : { secretHash: row.secret_hash };
  }

  join(node: NodeJoin, at: string): Promise<NodeRecord> {
    return this.#c.tx(async (db) => {
      const token = await joinRefusal(db, node);
      if (token instanceof LlmgwError) throw token;
      return writeJoin(db, node, token.name, at);
    });
  }

  /**
   * Many joins in one transaction (one commit, so one sync to disk, for a storm of agents):
   * each node's refusal (a revoked token, a name taken) is its own outcome and the others
   * still join. A write that fails for another reason fails them all; the caller then joins
   * them one by one.
   */
  joinMany(nodes: readonly NodeJoin[], at: string): Promise<(NodeRecord | LlmgwError)[]> {
    return this.#c.tx(async (db) => {
      const out: (NodeRecord | LlmgwError)[] = [];
      for (const node of nodes) {
        const token = await joinRefusal(db, node);
        out.push(token instanceof LlmgwError ? token : await writeJoin(db, node, token.name, at));
      }
      return out;
    });
  }

  /** Agents back with their node credential: inventories, addresses and when seen, in one transaction. */
  async reconnected(
    nodes: readonly { id: string; inventory: NodeInventory; address: string; at: string }[],
  ): Promise<void> {
    if (nodes.length === 0) return;
    await this.#c.tx(async (db) => {
      for (const n of nodes) {
        await db
          .updateTable('nodes')
          .set({
            inventory: JSON.stringify(n.inventory),
            inventory_at: n.at,
            last_seen_at: n.at,
            address: n.address,
          })
          .where('id', '=', n.id)
          .execute();
      }
    });
  }

  async updateInventory(id: string, inventory: NodeInventory, at: string): Promise<void> {
    await this.#c.db
      .updateTable('nodes')
      .set({ inventory: JSON.stringify(inventory), inventory_at: at, last_seen_at: at })
      .where('id', '=', id)
      .execute();
  }

  async touch(seen: readonly { id: string; at: string; address?: string }[]): Promise<void> {
    if (seen.length === 0) return;
    await this.#c.tx(async (db) => {
      for (const s of seen) {
        await db
          .updateTable('nodes')
          .set(s.address === undefined ? { last_seen_at: s.at } : { last_seen_at: s.at, address: s.address })
          .where('id', '=', s.id)
          .execute();
      }
    });
  }

  remove(name: string, actor: Actor): Promise<NodeRecord> {
    return this.#c.tx(async (db) => {
      const row = await db
        .deleteFrom('nodes')
        .where('name', '=', name)
        .returning(nodeColumns)
        .executeTakeFirst();
      if (row === undefined)
        throw new LlmgwError('not_found', `no node is named "${name}" (llmgw ctl nodes lists them)`);
      await writeAudit(db, {
        at: this.#c.now(),
        actor,
        action: 'node.remove',
        target: `node/${name}`,
        detail: { id: row.id },
      });
      return toNode(row);
    });
  }
}
