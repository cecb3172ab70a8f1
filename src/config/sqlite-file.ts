import { closeSync, openSync, readSync, statSync } from 'node:fs';

/**
 * What a file named as the SQLite database is, read from its bytes (the SQLite file format,
 * https://www.sqlite.org/fileformat2.html) without SQLite: SQLite would create -wal and -shm
 * files beside a database in WAL mode even to read it, and llmgw changes nothing of a file
 * before it knows the file is its own. Only the main file is read, so tables that are still
 * only in a -wal file (a database in use, never checkpointed) are not seen.
 */

/** The table llmgw's migrations record themselves in: a database that has it is llmgw's. */
export const llmgwTable = 'llmgw_migration';

export type SqliteFile =
  | { kind: 'absent' }
  /** A zero-byte file: what llmgw creates before SQLite first opens it. */
  | { kind: 'empty' }
  /** A folder, a device, a pipe: nothing SQLite keeps a database in. */
  | { kind: 'not-a-file' }
  | { kind: 'not-sqlite' }
  /** Its tables; undefined when the header is SQLite's but the schema could not be read. */
  | { kind: 'sqlite'; tables: string[] | undefined }
  | { kind: 'unreadable'; reason: string };

/** Whether a database file is one llmgw made: it has llmgw's migration table. */
export function isLlmgwDatabase(f: SqliteFile): boolean {
  return f.kind === 'sqlite' && f.tables?.includes(llmgwTable) === true;
}

const magic = Buffer.from('SQLite format 3\0', 'latin1');
/** Schema pages read at most: a schema has a few; a loop in a corrupt file ends here. */
const maxPages = 10_000;

/** Reads what `path` is, changing nothing. */
export function sqliteFile(path: string): SqliteFile {
  let size: number;
  try {
    const s = statSync(path);
    if (!s.isFile()) return { kind: 'not-a-file' };
    size = s.size;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { kind: 'absent' };
    if (code === 'ENOTDIR') return { kind: 'not-a-file' };
    return { kind: 'unreadable', reason: (e as Error).message };
  }
  if (size === 0) return { kind: 'empty' };
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    return { kind: 'unreadable', reason: (e as Error).message };
  }
  try {
    const read = (offset: number, length: number): Buffer => {
      const buf = Buffer.alloc(length);
      const n = readSync(fd, buf, 0, length, offset);
      return buf.subarray(0, n);
    };
    const header = read(0, 100);
    if (header.length < 100 || !header.subarray(0, 16).equals(magic)) return { kind: 'not-sqlite' };
    const raw = header.readUInt16BE(16);
    const pageSize = raw === 1 ? 65_536 : raw;
    if (pageSize < 512 || pageSize > 65_536 || (pageSize & (pageSize - 1)) !== 0)
      return { kind: 'not-sqlite' };
    const usable = pageSize - (header[20] ?? 0);
    const tables = schemaTables(
      (page) => read((page - 1) * pageSize, pageSize),
      usable,
      Math.ceil(size / pageSize),
    );
    return { kind: 'sqlite', tables };
  } catch (e) {
    return { kind: 'unreadable', reason: (e as Error).message };
  } finally {
    closeSync(fd);
  }
}

/**
 * The names of the tables in the schema b-tree rooted at page 1; undefined when it does not
 * read as one (a corrupt file, or one being checkpointed as it was read).
 */
export function schemaTables(
  page: (n: number) => Buffer,
  usable: number,
  pageCount: number,
): string[] | undefined {
  const tables: string[] = [];
  const seen = new Set<number>();
  const pending = [1];
  while (pending.length > 0) {
    const n = pending.pop() as number;
    if (n < 1 || n > pageCount || seen.has(n) || seen.size >= maxPages) return undefined;
    seen.add(n);
    const buf = page(n);
    const at = n === 1 ? 100 : 0;
    if (buf.length < at + 12) return undefined;
    const type = buf[at];
    const cells = buf.readUInt16BE(at + 3);
    if (type === 0x05) {
      // Interior table page: each cell is a child's page number and a key; then the right-most child.
      for (let i = 0; i < cells; i++) pending.push(buf.readUInt32BE(buf.readUInt16BE(at + 12 + 2 * i)));
      pending.push(buf.readUInt32BE(at + 8));
    } else if (type === 0x0d) {
      for (let i = 0; i < cells; i++) {
        const row = schemaRow(buf, buf.readUInt16BE(at + 8 + 2 * i), usable);
        if (row === undefined) return undefined;
        if (row.type === 'table') tables.push(row.name);
      }
    } else {
      return undefined;
    }
  }
  return tables;
}

/** The first two columns (type, name) of a leaf cell of sqlite_schema, from the part of the record stored on the page. */
function schemaRow(buf: Buffer, offset: number, usable: number): { type: string; name: string } | undefined {
  const size = varint(buf, offset);
  const at = varint(buf, size.next).next;
  // The bytes of the payload kept on this page; the rest is on overflow pages (the sql column, if long).
  const x = usable - 35;
  const m = Math.floor(((usable - 12) * 32) / 255) - 23;
  const k = m + ((size.value - m) % (usable - 4));
  const local = size.value <= x ? size.value : k <= x ? k : m;
  const end = Math.min(at + local, buf.length);
  const headerSize = varint(buf, at);
  let typeAt = headerSize.next;
  let body = at + headerSize.value;
  const columns: string[] = [];
  while (columns.length < 2 && typeAt < at + headerSize.value) {
    const serial = varint(buf, typeAt);
    typeAt = serial.next;
    // Text of length (N - 13) / 2 for odd N >= 13; type and name are always text.
    if (serial.value < 13 || serial.value % 2 === 0) return undefined;
    const length = (serial.value - 13) / 2;
    if (body + length > end) return undefined;
    columns.push(buf.toString('utf8', body, body + length));
    body += length;
  }
  const [type, name] = columns;
  return type === undefined || name === undefined ? undefined : { type, name };
}

/** SQLite's variable-length integer: up to 9 bytes, 7 bits each, the ninth whole. */
function varint(buf: Buffer, offset: number): { value: number; next: number } {
  let value = 0;
  for (let i = 0; i < 9; i++) {
    const b = buf[offset + i];
    if (b === undefined) throw new Error('a record runs past its page');
    if (i === 8) return { value: value * 256 + b, next: offset + 9 };
    value = value * 128 + (b & 0x7f);
    if ((b & 0x80) === 0) return { value, next: offset + i + 1 };
  }
  return { value, next: offset + 9 };
}
