import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { LlmgwError } from '../../core/errors.js';
import type { Origin } from '../../models/origin.js';
import type { ReplicaView } from '../../protocol/replica-views.js';

import { until } from '../../../test/support/fleet.js';

import type { Fleet } from './fleet.js';

/** A control plane running the fleet under test, with room for two replicas of the test's model. */
export interface FleetUnderTest {
  fleet: Fleet;
  /** Adds a model with `replicas` replicas to the catalog, as `ctl model add` does. */
  addModel(name: string, replicas: number): Promise<void>;
  removeModel(name: string): Promise<void>;
  stop(): Promise<void>;
}

/** What is not the same between fleets: the words of their answers, and what one of them refuses. */
export interface FleetHarness {
  start(): Promise<FleetUnderTest>;
  /** Part of what the fleet says of a replica it does not know. */
  unknownReplica: string;
  /** A line every replica's engine writes to its log. */
  logLine: RegExp;
  /** What `ctl model pull` of a model read from a path on each node answers: always a refusal. */
  pullRefused: { code: string; message: string };
  /** What `ctl cache` answers: each node's cache, or a refusal. */
  caches: { nodes: string[] } | { refused: { code: string; message: string } };
}

const refusal = async (work: () => unknown): Promise<LlmgwError> => {
  try {
    await work();
  } catch (e) {
    if (e instanceof LlmgwError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
};

const pathOrigin: Origin = {
  source: '/models/m.safetensors',
  kind: 'path',
  revision: '',
  files: [{ path: 'm.safetensors', size: 16 }],
};

/**
 * What every Fleet does, run against each implementation (the agents', the Kubernetes one):
 * the same cases through the Fleet interface, each fleet in a control plane of its own.
 */
export function fleetContract(name: string, harness: FleetHarness): void {
  describe(`Fleet contract: ${name}`, () => {
    let t: FleetUnderTest;
    const ready = (model: string, n: number, except: readonly string[] = []) =>
      until(
        `${n} ready replicas of ${model}`,
        () => {
          const list = t.fleet.replicas(model);
          return list.length === n &&
            list.every((r) => r.state === 'ready' && r.id !== null && !except.includes(r.id))
            ? list
            : undefined;
        },
        40_000,
      );
    const idOf = (r: ReplicaView | undefined): string => {
      if (r?.id == null) throw new Error('no placed replica');
      return r.id;
    };

    beforeAll(async () => {
      t = await harness.start();
    }, 60_000);
    afterAll(async () => {
      await t.stop();
    });

    it('gives a model added its replicas, which the replica views show', async () => {
      await t.addModel('m', 2);
      const list = await ready('m', 2);
      expect(new Set(list.map((r) => r.id)).size).toBe(2);
      for (const r of list) {
        expect(r.model).toBe('m');
        expect(t.fleet.replica(idOf(r))).toMatchObject({ id: r.id, model: 'm', state: 'ready' });
      }
      expect(t.fleet.replicas().filter((r) => r.model === 'm')).toHaveLength(2);
    });

    it('lists the ready replicas in the route table, and the model in its catalog', async () => {
      const list = await ready('m', 2);
      const table = await until('both replicas routed', async () => {
        const tb = await t.fleet.routeTable();
        return tb.replicas.filter((r) => r.model === 'm').length === 2 ? tb : undefined;
      });
      const routed = table.replicas.filter((r) => r.model === 'm');
      expect(routed.map((r) => r.id).sort()).toEqual(list.map(idOf).sort());
      for (const r of routed) expect(r.endpoint).toMatch(/^https?:\/\//);
      expect(table.models.map((m) => m.name)).toContain('m');
    });

    it("reads a replica's engine log", async () => {
      const [r] = await ready('m', 2);
      const lines: string[] = [];
      await until('a log line', async () => {
        lines.length = 0;
        await t.fleet.logs(idOf(r), {
          rank: 0,
          tail: 100,
          follow: false,
          signal: new AbortController().signal,
          onLines: (l) => lines.push(...l),
        });
        return lines.some((l) => harness.logLine.test(l)) ? true : undefined;
      });
    });

    it('restarts a replica in place: another takes its place', async () => {
      const [victim] = await ready('m', 2);
      const id = idOf(victim);
      const result = await t.fleet.restart(id, true, 'admin');
      expect(result).toMatchObject({ replica: id, mode: 'in-place' });
      const after = await ready('m', 2, [id]);
      expect(after.map((r) => r.id)).not.toContain(id);
    });

    it('answers not_found for a replica it does not know, to a view, a restart and a log', async () => {
      const views = await refusal(() => t.fleet.replica('nope-1'));
      expect(views.code).toBe('not_found');
      expect(views.message).toContain(harness.unknownReplica);
      const restart = await refusal(() => t.fleet.restart('nope-1', true, 'admin'));
      expect(restart.code).toBe('not_found');
      const logs = await refusal(() =>
        t.fleet.logs('nope-1', {
          rank: 0,
          tail: 1,
          follow: false,
          signal: new AbortController().signal,
          onLines: () => undefined,
        }),
      );
      expect(logs.code).toBe('not_found');
      expect(logs.message).toContain(harness.unknownReplica);
    });

    it("refuses to pull files read from each node's own path, and says what it has of the nodes' files", async () => {
      const pull = await refusal(() => t.fleet.pull('m', pathOrigin));
      expect({ code: pull.code, message: pull.message }).toMatchObject(harness.pullRefused);
      expect(t.fleet.downloads('m', pathOrigin)).toEqual({
        model: 'm',
        source: pathOrigin.source,
        nodes: [],
      });
      expect(t.fleet.activeDownloads()).toEqual([]);
      if ('refused' in harness.caches) {
        const caches = await refusal(() => t.fleet.caches());
        expect({ code: caches.code, message: caches.message }).toMatchObject(harness.caches.refused);
      } else {
        expect((await t.fleet.caches()).map((c) => c.node)).toEqual(harness.caches.nodes);
      }
    });

    it('leaves no replica of a model removed, in the views or the route table', async () => {
      await t.removeModel('m');
      await until('no replica of m', () => (t.fleet.replicas('m').length === 0 ? true : undefined), 40_000);
      const table = await t.fleet.routeTable();
      expect(table.replicas.filter((r) => r.model === 'm')).toEqual([]);
      expect(table.models.map((m) => m.name)).not.toContain('m');
    });
  });
}
