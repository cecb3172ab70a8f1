import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { writeFileAtomic } from '../config/write.js';
import type { ServerMessage } from '../protocol/agent-protocol.js';

export type Assign = Extract<ServerMessage, { type: 'assign' }>;

/**
 * The last assignment the control plane sent, kept on disk: a restarted agent starts its
 * engines again (or takes them over) even while the control plane is away.
 */
export class SavedAssignment {
  readonly file: string;

  constructor(dataDir: string) {
    this.file = join(dataDir, 'agent', 'assignment.json');
  }

  /** The saved one; undefined when none was saved. Throws when it cannot be read. */
  read(): Assign | undefined {
    if (!existsSync(this.file)) return undefined;
    return JSON.parse(readFileSync(this.file, 'utf8')) as Assign;
  }

  write(m: Assign): void {
    writeFileAtomic(this.file, JSON.stringify(m));
  }
}
