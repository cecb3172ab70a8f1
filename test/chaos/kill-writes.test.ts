import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import SqliteDatabase from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';

import { createTempDatabase, type TempDatabase } from '../support/postgres.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

import { chaosReport, scaled } from './chaos.js';

/**
 * kill -9 a control plane while models, keys and settings are written through its API:
 * every write answered 2xx is there afterwards, read back through the API of a control plane
 * that did not die and of the one started again, and the settings file on disk is whole.
 */

const rounds = scaled(2, 10);
/** Concurrent writers of models and keys, per control plane. */
const writersPerServer = scaled(4, 8);
/** Writes answered in a round before its kill may come (so every kind is written, however loaded the machine). */
const writesBeforeKill = scaled(20, 60);
/** Then the kill comes after a random time in this range, in ms. */
const killAfterMs = scaled([0, 800] as const, [0, 5000] as const);
/** Each scenario's limit: it starts and kills processes, slow on a loaded 2-core machine. */
const timeoutMs = scaled(120_000, 1_800_000);
const engineKeySecret = 'kill-writes-engine-key-secret-0123456789abcdef';

/** The settings file at write number `n`: the number is both in a comment and in a value, so a torn file shows. */
function settingsText(n: number): string {
  return `# chaos settings write ${n}\nplacement:\n  node_lost_after_s: ${100 + n}\n`;
}

/** The write number a settings file holds, or why it is not a whole file of ours. */
function settingsNumber(text: string): number | string {
  const comment = /^# chaos settings write (\d+)\n/.exec(text);
  if (comment === null) return `no write number in ${JSON.stringify(text.slice(0, 80))}`;
  const n = Number(comment[1]);
  const parsed = parseYaml(text) as { placement?: { node_lost_after_s?: unknown } } | null;
  if (parsed?.placement?.node_lost_after_s !== 100 + n)
    return `a torn settings file (write ${n}): ${JSON.stringify(text)}`;
  return n;
}

interface SettingsLedger {
  /** The last write number answered 200. */
  answered: number;
  /** The last write number sent (answered or not). */
  sent: number;
}

/** What was written and answered, across rounds. */
class Ledger {
  /** Models added, with the version of their last answered change. */
  readonly models = new Map<string, number>();
  /** Keys created. */
  readonly keys = new Set<string>();
  /** Keys revoked: a revocation that comes back undone is a key that works again. */
  readonly revoked = new Set<string>();
  /** By settings file path (one per control plane). */
  readonly settings = new Map<string, SettingsLedger>();
  answered = 0;
  /** Sent, and no answer came: either outcome is right. */
  inDoubt = 0;
  /** Answers other than 2xx: none is expected, each is a bug. */
  readonly refusals: string[] = [];
}

type Sent = { status: number; body: unknown; text: string } | 'no answer';

async function send(
  server: ServerProcess,
  method: string,
  path: string,
  body: string | undefined,
  contentType = 'application/json',
): Promise<Sent> {
  try {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${server.adminKey}`, 'content-type': contentType },
      body,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    return { status: res.status, text, body: contentType === 'application/json' ? JSON.parse(text) : text };
  } catch {
    // Reset, refused, or cut mid-answer: the process is gone.
    return 'no answer';
  }
}

const versionOf = (body: unknown) => (body as { metadata: { version: number } }).metadata.version;

/**
 * Writes in turn until stopped or the server is gone: adds a model, creates a key, changes
 * the model it added last, revokes the key it created last.
 */
async function modelAndKeyWriter(
  server: ServerProcess,
  ledger: Ledger,
  tag: string,
  stop: AbortSignal,
): Promise<void> {
  let lastModel: string | undefined;
  let lastKey: string | undefined;
  for (let i = 0; !stop.aborted; i++) {
    const step = i % 4;
    let what: string;
    let r: Sent;
    if (step === 0) {
      what = `add model m-${tag}-${i}`;
      r = await send(
        server,
        'POST',
        '/models',
        JSON.stringify({
          name: `m-${tag}-${i}`,
          source: '/models/chaos.gguf',
          profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
        }),
      );
    } else if (step === 1) {
      what = `create key k-${tag}-${i}`;
      r = await send(server, 'POST', '/keys', JSON.stringify({ name: `k-${tag}-${i}` }));
    } else if (step === 2 && lastModel !== undefined) {
      what = `change model ${lastModel}`;
      r = await send(server, 'PATCH', `/models/${lastModel}`, JSON.stringify({ replicas: 2 }));
    } else if (step === 3 && lastKey !== undefined) {
      what = `revoke key ${lastKey}`;
      r = await send(server, 'DELETE', `/keys/${lastKey}`, undefined);
    } else continue;
    if (r === 'no answer') {
      ledger.inDoubt++;
      return;
    }
    if (r.status < 200 || r.status > 299) {
      ledger.refusals.push(`${what}: ${r.status} ${r.text}`);
      continue;
    }
    ledger.answered++;
    if (step === 0) {
      lastModel = `m-${tag}-${i}`;
      ledger.models.set(lastModel, versionOf(r.body));
    } else if (step === 1) {
      lastKey = `k-${tag}-${i}`;
      ledger.keys.add(lastKey);
    } else if (step === 2 && lastModel !== undefined) {
      ledger.models.set(lastModel, versionOf(r.body));
    } else if (step === 3 && lastKey !== undefined) {
      ledger.revoked.add(lastKey);
    }
  }
}

/** Replaces the settings file, one write after another, each with the next number. */
async function settingsWriter(server: ServerProcess, ledger: Ledger, stop: AbortSignal): Promise<void> {
  const mine = ledger.settings.get(server.configPath);
  if (mine === undefined) throw new Error(`no settings ledger for ${server.configPath}`);
  while (!stop.aborted) {
    const n = mine.sent + 1;
    mine.sent = n;
    const r = await send(server, 'PUT', '/config', settingsText(n), 'application/yaml');
    if (r === 'no answer') {
      ledger.inDoubt++;
      return;
    }
    if (r.status === 200) {
      ledger.answered++;
      mine.answered = n;
    } else {
      ledger.refusals.push(`settings write ${n}: ${r.status} ${r.text}`);
    }
  }
}

function startWriters(servers: readonly ServerProcess[], ledger: Ledger, round: number, stop: AbortSignal) {
  return Promise.all(
    servers.flatMap((s, si) => [
      settingsWriter(s, ledger, stop),
      ...Array.from({ length: writersPerServer }, (_, w) =>
        modelAndKeyWriter(s, ledger, `r${round}-s${si}-w${w}`, stop),
      ),
    ]),
  );
}

interface Missing {
  /** Models added and not there, or there at a version older than the last answered change. */
  models: number;
  keys: number;
  /** Keys whose revocation was answered, active again. */
  revocations: number;
  settings: number;
  /** What is missing, for the failure's message. */
  what: string[];
}

/** Reads everything answered back through `reader`'s API, and its own settings file as it serves it. */
async function missingThrough(reader: ServerProcess, ledger: Ledger): Promise<Missing> {
  const get = async (path: string) => {
    const res = await fetch(`${reader.url}/api/v1${path}`, {
      headers: { authorization: `Bearer ${reader.adminKey}` },
    });
    expect(res.status, `GET ${path}`).toBe(200);
    return res;
  };
  const models = new Map(
    (
      (await (await get('/models')).json()) as { items: { name: string; metadata: { version?: number } }[] }
    ).items.map((m) => [m.name, m.metadata.version ?? 0]),
  );
  const keys = new Map(
    (
      (await (await get('/keys?revoked=true')).json()) as {
        items: { name: string; revoked_at: string | null }[];
      }
    ).items.map((k) => [k.name, k.revoked_at]),
  );
  const what: string[] = [];
  const lostModels = [...ledger.models].filter(([name, version]) => (models.get(name) ?? -1) < version);
  what.push(
    ...lostModels.map(([name, v]) => `model ${name} at version ${models.get(name) ?? 'none'}, answered ${v}`),
  );
  const lostKeys = [...ledger.keys].filter((k) => !keys.has(k));
  what.push(...lostKeys.map((k) => `key ${k}`));
  const undone = [...ledger.revoked].filter((k) => keys.has(k) && keys.get(k) === null);
  what.push(...undone.map((k) => `key ${k} active again after its revocation was answered`));
  let settings = 0;
  const mine = ledger.settings.get(reader.configPath);
  if (mine !== undefined) {
    const shown = settingsNumber(await (await get('/config')).text());
    if (typeof shown === 'string' || shown < mine.answered || shown > mine.sent) {
      settings++;
      what.push(`settings served: ${String(shown)}, answered up to ${mine.answered}, sent ${mine.sent}`);
    }
  }
  return { models: lostModels.length, keys: lostKeys.length, revocations: undone.length, settings, what };
}

/** The settings file on disk, read while no process holds it: whole, and at the last answered write or later. */
function settingsFileProblem(server: ServerProcess, ledger: Ledger): string | undefined {
  const mine = ledger.settings.get(server.configPath);
  const n = settingsNumber(readFileSync(server.configPath, 'utf8'));
  if (typeof n === 'string') return n;
  if (mine !== undefined && (n < mine.answered || n > mine.sent))
    return `the settings file holds write ${n}, answered up to ${mine.answered}, sent ${mine.sent}`;
  return undefined;
}

/** Temporary files of an atomic write of the settings file, beside it. */
function tempCopies(server: ServerProcess): string[] {
  const name = basename(server.configPath);
  return readdirSync(dirname(server.configPath)).filter(
    (f) => f.startsWith(`${name}.`) && f.endsWith('.tmp'),
  );
}

/** Log lines at error or fatal level (a restart that recovered with complaints is not clean). */
function errorLines(output: string): string[] {
  return output.split('\n').filter((l) => /"level":"(error|fatal)"/.test(l));
}

function sqliteIntegrity(database: string): string {
  const file = new SqliteDatabase(database.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
  try {
    return (file.pragma('integrity_check') as { integrity_check: string }[])
      .map((r) => r.integrity_check)
      .join('; ');
  } finally {
    file.close();
  }
}

const randomBetween = ([lo, hi]: readonly [number, number]) => lo + Math.floor(Math.random() * (hi - lo));

/** Waits until `count` more writes are answered (at most 20 s), then a random time. */
async function killTime(ledger: Ledger, count: number): Promise<void> {
  const target = ledger.answered + count;
  const deadline = Date.now() + 20_000;
  while (ledger.answered < target && Date.now() < deadline) await sleep(20);
  await sleep(randomBetween(killAfterMs));
}

interface Totals {
  kills: number;
  lost: { models: number; keys: number; revocations: number; settings: number; settings_file: number };
  problems: string[];
}

function addMissing(t: Totals, m: Missing, where: string): void {
  t.lost.models += m.models;
  t.lost.keys += m.keys;
  t.lost.revocations += m.revocations;
  t.lost.settings += m.settings;
  t.problems.push(...m.what.map((w) => `${where}: ${w}`));
}

function report(scenario: string, ledger: Ledger, t: Totals): string {
  return chaosReport(
    scenario,
    {
      rounds,
      kills: t.kills,
      answered_writes: ledger.answered,
      models: ledger.models.size,
      keys: ledger.keys.size,
      revoked: ledger.revoked.size,
      settings_writes: [...ledger.settings.values()].reduce((a, s) => a + s.answered, 0),
      in_doubt: ledger.inDoubt,
    },
    { ...t.lost, refused_writes: ledger.refusals.length },
  );
}

describe('chaos: kill -9 a control plane while models, keys and settings are written', () => {
  it(
    'SQLite, one control plane: every write answered 2xx is there after each restart, the store passes integrity_check',
    async () => {
      const ledger = new Ledger();
      const server = await startServerProcess({ config: settingsText(0) });
      ledger.settings.set(server.configPath, { answered: 0, sent: 0 });
      const t: Totals = {
        kills: 0,
        lost: { models: 0, keys: 0, revocations: 0, settings: 0, settings_file: 0 },
        problems: [],
      };
      try {
        for (let round = 0; round < rounds; round++) {
          const stop = new AbortController();
          const writers = startWriters([server], ledger, round, stop.signal);
          await killTime(ledger, writesBeforeKill);
          await server.kill();
          t.kills++;
          stop.abort();
          await writers;

          const fileProblem = settingsFileProblem(server, ledger);
          if (fileProblem !== undefined) {
            t.lost.settings_file++;
            t.problems.push(`round ${round}: ${fileProblem}`);
          }
          const address = server.url;
          await server.restart();
          expect(server.url, 'started again on the same address').toBe(address);
          expect(errorLines(server.output()), 'the restarted control plane logged errors').toEqual([]);
          addMissing(t, await missingThrough(server, ledger), `round ${round}, after the restart`);
          expect(sqliteIntegrity(server.database)).toBe('ok');
        }
        expect(await server.stop(), 'a clean stop after the last round').toBe(0);
        expect(sqliteIntegrity(server.database)).toBe('ok');
      } finally {
        await server.cleanup();
      }
      const line = report('kill-writes-sqlite', ledger, t);
      expect(ledger.models.size + ledger.keys.size, 'writes were answered before each kill').toBeGreaterThan(
        0,
      );
      expect(t.problems, line).toEqual([]);
      expect(ledger.refusals, line).toEqual([]);
    },
    timeoutMs,
  );

  describe('PostgreSQL, two control planes on one database', () => {
    let db: TempDatabase;
    beforeAll(async () => {
      db = await createTempDatabase();
    });
    afterAll(async () => {
      await db.drop();
    });

    it(
      'every write answered 2xx by either is there, through the one that lives on and through the one started again',
      async () => {
        const ledger = new Ledger();
        const env = { LLMGW_ENGINE_KEY_SECRET: engineKeySecret };
        const servers: ServerProcess[] = [];
        const t: Totals = {
          kills: 0,
          lost: { models: 0, keys: 0, revocations: 0, settings: 0, settings_file: 0 },
          problems: [],
        };
        try {
          // One after the other: the first one migrates the fresh database.
          for (let i = 0; i < 2; i++) {
            const s = await startServerProcess({ config: settingsText(0), database: db.url, env });
            servers.push(s);
            ledger.settings.set(s.configPath, { answered: 0, sent: 0 });
          }
          for (let round = 0; round < rounds; round++) {
            const victim = servers[round % 2];
            const survivor = servers[(round + 1) % 2];
            if (victim === undefined || survivor === undefined) throw new Error('two control planes');
            const stop = new AbortController();
            const writers = startWriters(servers, ledger, round, stop.signal);
            await killTime(ledger, writesBeforeKill);
            await victim.kill();
            t.kills++;
            // The survivor goes on taking writes for a while with its peer dead.
            await sleep(300);
            stop.abort();
            await writers;

            addMissing(t, await missingThrough(survivor, ledger), `round ${round}, through the survivor`);
            const fileProblem = settingsFileProblem(victim, ledger);
            if (fileProblem !== undefined) {
              t.lost.settings_file++;
              t.problems.push(`round ${round}: ${fileProblem}`);
            }
            await victim.restart();
            expect(errorLines(victim.output()), 'the restarted control plane logged errors').toEqual([]);
            addMissing(t, await missingThrough(victim, ledger), `round ${round}, after the restart`);
          }
          for (const s of servers) expect(await s.stop(), 'a clean stop after the last round').toBe(0);
        } finally {
          for (const s of servers) await s.cleanup();
        }
        const line = report('kill-writes-postgres', ledger, t);
        expect(
          ledger.models.size + ledger.keys.size,
          'writes were answered before each kill',
        ).toBeGreaterThan(0);
        expect(t.problems, line).toEqual([]);
        expect(ledger.refusals, line).toEqual([]);
      },
      timeoutMs,
    );
  });
});

describe('chaos: kill -9 a control plane while its settings file is replaced', () => {
  it(
    'leaves the file whole, at the last answered write or a later one, and no temporary copy of it behind',
    async () => {
      const kills = scaled(4, 40);
      const ledger = new Ledger();
      const server = await startServerProcess({ config: settingsText(0) });
      ledger.settings.set(server.configPath, { answered: 0, sent: 0 });
      const problems: string[] = [];
      let leftovers = 0;
      try {
        for (let k = 0; k < kills; k++) {
          const stop = new AbortController();
          const writer = settingsWriter(server, ledger, stop.signal);
          // Short: most kills land in the middle of a write (each takes a few ms of fsync).
          await sleep(randomBetween([100, 400]));
          await server.kill();
          stop.abort();
          await writer;
          const problem = settingsFileProblem(server, ledger);
          if (problem !== undefined) problems.push(`kill ${k}: ${problem}`);
          await server.restart();
          const left = tempCopies(server);
          leftovers += left.length;
          problems.push(...left.map((f) => `kill ${k}: left behind ${f}`));
        }
        const served = await missingThrough(server, ledger);
        problems.push(...served.what);
      } finally {
        await server.cleanup();
      }
      const mine = ledger.settings.get(server.configPath);
      const line = chaosReport(
        'kill-settings-file',
        { kills, answered_writes: ledger.answered, in_doubt: ledger.inDoubt },
        {
          torn_or_behind: problems.length - leftovers,
          temp_copies_left: leftovers,
          refused_writes: ledger.refusals.length,
        },
      );
      expect(mine?.answered, 'settings writes were answered').toBeGreaterThan(0);
      expect(problems, line).toEqual([]);
      expect(ledger.refusals, line).toEqual([]);
    },
    timeoutMs,
  );
});

describe('chaos: kill -9 a control plane while it starts', () => {
  const kills = scaled(3, 20);

  /** Kills a first start at a random moment, starts it again: it must come up clean and take a write. */
  async function killWhileStarting(database: (() => Promise<TempDatabase>) | undefined): Promise<string[]> {
    const problems: string[] = [];
    let killedBeforeListening = 0;
    for (let k = 0; k < kills; k++) {
      const db = await database?.();
      const server = await startServerProcess({
        wait: false,
        ...(db === undefined ? {} : { database: db.url, env: { LLMGW_ENGINE_KEY_SECRET: engineKeySecret } }),
      });
      try {
        await sleep(randomBetween([0, 2000]));
        await server.kill();
        if (!/"msg":"control plane listening"/.test(server.output())) killedBeforeListening++;
        await server.restart();
        problems.push(...errorLines(server.output()).map((l) => `kill ${k}, the restart logged: ${l}`));
        const r = await send(server, 'POST', '/keys', JSON.stringify({ name: `after-kill-${k}` }));
        if (r === 'no answer' || r.status !== 201)
          problems.push(`kill ${k}: a key after the restart: ${JSON.stringify(r)}`);
        if (db === undefined && sqliteIntegrity(server.database) !== 'ok')
          problems.push(`kill ${k}: ${sqliteIntegrity(server.database)}`);
      } catch (e) {
        problems.push(`kill ${k}: ${(e as Error).message}`);
      } finally {
        await server.cleanup();
        await db?.drop();
      }
    }
    chaosReport(
      database === undefined ? 'kill-start-sqlite' : 'kill-start-postgres',
      { kills, killed_before_listening: killedBeforeListening },
      { failed_restarts: problems.length },
    );
    return problems;
  }

  it(
    'on SQLite: each next start is clean, the store whole',
    async () => {
      expect(await killWhileStarting(undefined)).toEqual([]);
    },
    timeoutMs,
  );

  it(
    'on PostgreSQL: each next start is clean',
    async () => {
      expect(await killWhileStarting(createTempDatabase)).toEqual([]);
    },
    timeoutMs,
  );
});
