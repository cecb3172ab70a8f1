import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Api, ApiError } from '../console/src/api.js';
import { deviceRow } from '../console/src/views/nodes-rows.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api as call, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { a100, migA100 } from './support/inventory.js';

/**
 * The console's calls of the Nodes and Replicas views against a real control plane: the paths,
 * bodies and answers the views rely on, and the refusals they show in the server's words.
 */
describe("the Nodes and Replicas views' calls", () => {
  let t: TestControlPlane;
  let agent: TestAgent;
  let admin: Api;
  let user: Api;

  const consoleApi = (key: string) =>
    new Api({ key, fetch: (input, init) => fetch(`${t.url}${input as string}`, init) });
  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => {
        throw new Error('not refused');
      },
      (e: unknown) => {
        if (!(e instanceof ApiError)) throw e;
        return { status: e.status, code: e.code, message: e.message };
      },
    );

  beforeAll(async () => {
    t = await startControlPlane();
    agent = await startTestAgent(t, 'gpu-1', [a100(0), migA100(1, ['3g.40gb', '3g.40gb'])]);
    admin = consoleApi(t.adminKey);
    const key = await call(t.url, t.adminKey, 'POST', '/keys', { name: 'viewer', role: 'user' });
    user = consoleApi(key.body.secret as string);
  });
  afterAll(async () => {
    await agent.stop();
    await t.stop();
  });

  it('lists a node with its card and MIG instances as the view shows them', async () => {
    const [node] = await admin.nodes();
    expect(node?.name).toBe('gpu-1');
    const rows = (node?.devices ?? []).map(deviceRow);
    expect(rows.map((r) => [r.id, r.class, r.kind, r.utilisation, r.memory.text])).toEqual([
      ['0', 'a100-80g', 'card', '0 %', '0 / 81,920 MiB'],
      ['1/mig0', 'a100-80g-mig-3g.40gb', 'MIG 3g.40gb', 'not measured on MIG', '13 / 40,192 MiB'],
      ['1/mig1', 'a100-80g-mig-3g.40gb', 'MIG 3g.40gb', 'not measured on MIG', '13 / 40,192 MiB'],
    ]);
  });

  it('makes a join token whose secret the answer holds, and refuses a bad name in words', async () => {
    const created = await admin.createJoinToken({ name: 'rack-3', expires_in: 3600 });
    expect(created.token.name).toBe('rack-3');
    expect(created.token.expires_at).not.toBeNull();
    expect(created.secret.length).toBeGreaterThan(20);
    // The answer to the create is the only one that holds it.
    const listed = await call(t.url, t.adminKey, 'GET', '/node-tokens');
    expect(JSON.stringify(listed.body)).toContain('rack-3');
    expect(JSON.stringify(listed.body)).not.toContain(created.secret);
    const bad = await refusal(admin.createJoinToken({ name: 'Rack 3' }));
    expect(bad.status).toBe(400);
    expect(bad.message).toContain(
      'a token name is lower-case letters, digits, ".", "_" and "-" (e.g. "rack-3")',
    );
    const forbidden = await refusal(user.createJoinToken({}));
    expect(forbidden.status).toBe(403);
    expect(forbidden.message).not.toBe('');
  });

  it('refuses a restart and logs of a replica that does not exist, naming it', async () => {
    expect(await refusal(admin.restartReplica('r-nope', false))).toEqual({
      status: 404,
      code: 'not_found',
      message: 'no replica is named "r-nope" (llmgw ctl replicas lists them)',
    });
    const ac = new AbortController();
    const logs = await refusal(admin.logs('r-nope', { rank: 0, tail: 10, follow: true, signal: ac.signal }));
    expect(logs.status).toBe(404);
    expect(logs.message).toContain('r-nope');
    expect((await refusal(user.restartReplica('r-nope', true))).status).toBe(403);
  });

  it('removes a node (a user key may not), and refuses one that is not there', async () => {
    expect((await refusal(user.removeNode('gpu-1'))).status).toBe(403);
    expect(await admin.removeNode('gpu-1')).toMatchObject({ name: 'gpu-1' });
    expect(await admin.nodes()).toEqual([]);
    const gone = await refusal(admin.removeNode('gpu-1'));
    expect(gone.status).toBe(404);
    expect(gone.message).toContain('gpu-1');
  });
});
