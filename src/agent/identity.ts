import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

import { z } from 'zod';

import { writeFileAtomic } from '../config/write.js';
import { LlmgwError } from '../core/errors.js';
import { toDnsLabel } from '../core/names.js';

/**
 * Who this node is, kept in its data dir so it stays the same node across agent
 * restarts: an id made on first start, its name, and the credential the control plane
 * gave it on joining (used instead of the join token from then on).
 */
export interface NodeIdentity {
  id: string;
  name: string;
  /** The control plane that last welcomed it (informational: the credential is good on every control plane of the cluster). */
  server?: string | undefined;
  credential?: string | undefined;
}

const identitySchema = z.object({
  id: z.string().min(8),
  name: z.string().min(1),
  server: z.string().optional(),
  credential: z.string().optional(),
});

export function identityPath(dataDir: string): string {
  return join(dataDir, 'agent', 'node.json');
}

/** The saved identity, or a new one named after the host (or `name`). */
export function loadIdentity(dataDir: string, name?: string): NodeIdentity {
  const path = identityPath(dataDir);
  if (existsSync(path)) {
    let saved: NodeIdentity;
    try {
      saved = identitySchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    } catch {
      throw new LlmgwError(
        'invalid_argument',
        `${path} is not a node identity: move it away to join as a new node`,
      );
    }
    if (name !== undefined && name !== saved.name) {
      // A new name is a new node to the control plane: its credential is for the old one.
      return { id: saved.id, name };
    }
    return saved;
  }
  return { id: randomUUID(), name: name ?? toDnsLabel(hostname()) };
}

/** Saved readable by its owner only: it holds the node's credential. */
export function saveIdentity(dataDir: string, identity: NodeIdentity): void {
  writeFileAtomic(identityPath(dataDir), `${JSON.stringify(identity, null, 2)}\n`);
}
