import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';

import { pino } from 'pino';

import { loadSettings } from '../../src/config/load.js';
import { ControlPlane, type ControlPlaneOptions } from '../../src/server/control-plane.js';
import { openStore } from '../../src/store/open.js';
import type { FakeHub, FakeRepo } from '../fakes/hub/hub.js';

import { startTestHub } from './hub.js';

export interface TestControlPlane {
  cp: ControlPlane;
  url: string;
  adminKey: string;
  dir: string;
  configPath: string;
  /** The fake hub its model sources resolve against (HF_ENDPOINT). */
  hub: FakeHub;
  /** Every log line written so far. */
  logs: () => string;
  stop: () => Promise<void>;
}

export interface StartOptions {
  /** The settings file's text; written before the start. */
  config?: string;
  database?: string;
  env?: Record<string, string>;
  adminKey?: string;
  /** Default 127.0.0.1:0. */
  listen?: string;
  /** The mirror's blob keys (ControlPlaneOptions.mirrorLookup). */
  mirrorLookup?: ControlPlaneOptions['mirrorLookup'];
  /** The fake hub's repositories; default test/support/hub.ts testRepos(). */
  repos?: Record<string, FakeRepo>;
  /** What sources are resolved with (to count or fail requests). */
  fetch?: typeof fetch;
  /** Each model's pinned origin, where a test gives them. */
  originOf?: ControlPlaneOptions['originOf'];
  /** The built console it serves at / (ControlPlaneOptions.consoleDir). */
  consoleDir?: string;
  /** GET /events' heartbeat and gap between events (ControlPlaneOptions.events). */
  events?: ControlPlaneOptions['events'];
  /** How often GET /traffic samples the gateway (ControlPlaneOptions.trafficStepMs). */
  trafficStepMs?: number;
}

/** A control plane in this process on 127.0.0.1:0, with its own data dir and SQLite file. */
export async function startControlPlane(options: StartOptions = {}): Promise<TestControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-cp-'));
  const configPath = join(dir, 'config.yaml');
  if (options.config !== undefined) writeFileSync(configPath, options.config);
  const hub = await startTestHub(options.repos);
  const env = {
    // Sources resolve against the fake hub, unless the settings or the test name another.
    HF_ENDPOINT: hub.url,
    LLMGW_DATA_DIR: dir,
    ...(options.config === undefined ? {} : { LLMGW_CONFIG: configPath }),
    ...(options.database === undefined ? {} : { LLMGW_DATABASE: options.database }),
    ...options.env,
  };
  const loadOptions = { env, cwd: dir };
  let settings;
  try {
    settings = loadSettings(loadOptions);
  } catch (e) {
    await hub.close();
    throw e;
  }
  let text = '';
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        text += chunk.toString();
        cb();
      },
    }),
  );
  const store = await openStore(settings.settings.database);
  let cp: ControlPlane;
  try {
    cp = await ControlPlane.start({
      settings,
      loadOptions,
      store,
      logger,
      version: '0.0.0-test',
      adminKey: options.adminKey,
      engineKeySecret: options.env?.['LLMGW_ENGINE_KEY_SECRET'],
      listen: options.listen ?? '127.0.0.1:0',
      ...(options.mirrorLookup === undefined ? {} : { mirrorLookup: options.mirrorLookup }),
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      ...(options.originOf === undefined ? {} : { originOf: options.originOf }),
      ...(options.consoleDir === undefined ? {} : { consoleDir: options.consoleDir }),
      ...(options.events === undefined ? {} : { events: options.events }),
      ...(options.trafficStepMs === undefined ? {} : { trafficStepMs: options.trafficStepMs }),
    });
  } catch (e) {
    // A refused start (the test of a refusal) leaves nothing open behind.
    await store.close();
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const adminKey = options.adminKey ?? cp.generatedAdminKey;
  if (adminKey === undefined) throw new Error('no admin key');
  return {
    cp,
    url: cp.url,
    adminKey,
    dir,
    configPath,
    hub,
    logs: () => text,
    stop: async () => {
      await cp.stop();
      await hub.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** fetch against the API with a key, returning status, headers and parsed body. */
export async function api(
  base: string,
  key: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const h: Record<string, string> = { ...headers };
  if (key !== undefined) h['authorization'] = `Bearer ${key}`;
  let payload: string | undefined;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    h['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}/api/v1${path}`, { method, headers: h, body: payload });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json')) parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed };
}
