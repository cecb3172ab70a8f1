import { createHash, randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startFakeHub, type FakeHub } from '../../../test/fakes/hub/hub.js';
import { api, startControlPlane, type TestControlPlane } from '../../../test/support/control-plane.js';
import { generateSecret, hashSecret } from '../../core/secrets.js';
import { blobKey, filePaths, originLayout } from '../../models/cache-layout.js';
import type { Origin } from '../../models/origin.js';
import { resolveOrigin } from '../../models/resolve.js';
import type { NodeInventory } from '../../gpu/types.js';
import { nodeIdHeader } from '../../protocol/agent-protocol.js';

import { llamaGguf, llamaGgufFile, llamaGgufRepo } from '../../../test/support/hub.js';

import { mirrorBlobsPath } from './mirror-route.js';

const token = 'hf_routetesttoken0123456789';
const gguf = randomBytes(2 * 1024 * 1024 + 3);

describe('the mirror on the control plane', () => {
  let hub: FakeHub;
  let origin: Origin;
  let tcp: TestControlPlane;
  let key: string;
  let nodeSecret: string;
  const nodeId = 'node-mirror-0001';

  beforeAll(async () => {
    hub = await startFakeHub({ repos: { 'org/tiny-GGUF': { files: { 'tiny-Q8_0.gguf': gguf } } } });
    origin = await resolveOrigin('hf://org/tiny-GGUF/tiny-Q8_0.gguf', { fetch, endpoint: hub.url });
    const file = origin.files[0]!;
    key = blobKey(origin, file);
    tcp = await startControlPlane({
      env: { HF_ENDPOINT: hub.url, HF_TOKEN: token },
      mirrorLookup: (k) => (k === key ? { origin, file } : undefined),
    });
    // A node as the agent channel leaves it: joined with a token, holding its credential.
    const store = tcp.cp.store;
    const joinToken = await store.joinTokens.create(
      { name: 'rack-1', prefix: 'p', secretHash: hashSecret(generateSecret('join')), expiresAt: null },
      'admin',
    );
    nodeSecret = generateSecret('node');
    const inventory = {
      host: { hostname: 'gpu-1' },
      gpu: { method: 'none', reasons: [], cards: [] },
      agent_version: '1',
    } as unknown as NodeInventory;
    await store.nodes.join(
      {
        id: nodeId,
        name: 'gpu-1',
        joined_with: 'rack-1',
        address: '127.0.0.1',
        agent_version: '1',
        inventory,
        secretHash: hashSecret(nodeSecret),
        tokenId: joinToken.id,
      },
      new Date().toISOString(),
    );
  });
  afterAll(async () => {
    await tcp.stop();
    await hub.close();
  });

  const blob = (headers: Record<string, string>) => fetch(`${tcp.url}${mirrorBlobsPath}${key}`, { headers });
  const refusal = async (headers: Record<string, string>) => {
    const res = await blob(headers);
    const body = (await res.json()) as { error: { code: string; message: string } };
    return { status: res.status, ...body.error };
  };

  it('serves a node (its credential and id) and an admin key, fetching from the hub once', async () => {
    const asNode = await blob({ authorization: `Bearer ${nodeSecret}`, [nodeIdHeader]: nodeId });
    expect(asNode.status).toBe(200);
    const bytes = Buffer.from(await asNode.arrayBuffer());
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(origin.files[0]!.sha256);
    const asAdmin = await blob({ authorization: `Bearer ${tcp.adminKey}`, range: 'bytes=0-99' });
    expect(asAdmin.status).toBe(206);
    expect(Buffer.from(await asAdmin.arrayBuffer()).equals(gguf.subarray(0, 100))).toBe(true);

    expect(hub.requests.filter((r) => r.url.includes('/resolve/')).map((r) => r.authorization)).toEqual([
      `Bearer ${token}`,
    ]);
    // Kept under the data dir, in the Hugging Face cache layout.
    await tcp.cp.mirror.idle();
    const paths = filePaths(originLayout(join(tcp.dir, 'mirror'), origin)!, origin, origin.files[0]!);
    expect(readlinkSync(paths.snapshot)).toBe(paths.link);
    expect(tcp.logs()).not.toContain(token);
    expect(tcp.logs()).not.toContain(nodeSecret);
  });

  it('refuses requests without a credential, with a wrong one, or with a user key', async () => {
    expect(await refusal({})).toEqual({
      status: 401,
      code: 'unauthenticated',
      message: `the mirror serves the cluster's nodes and admins: send "Authorization: Bearer SECRET" with a node's credential (and its id in ${nodeIdHeader}, as agents do) or an admin key`,
    });
    const nodeRefused = {
      status: 401,
      code: 'unauthenticated',
      message:
        "this node's credential is not valid here (was the node removed, or the database replaced?): join it again with a token (llmgw ctl node token)",
    };
    expect(
      await refusal({ authorization: `Bearer ${generateSecret('node')}`, [nodeIdHeader]: nodeId }),
    ).toEqual(nodeRefused);
    expect(
      await refusal({ authorization: `Bearer ${nodeSecret}`, [nodeIdHeader]: 'node-unknown-0002' }),
    ).toEqual(nodeRefused);
    expect(await refusal({ authorization: `Bearer ${nodeSecret}` })).toEqual({
      status: 401,
      code: 'unauthenticated',
      message: `a node's credential comes with the node's id in the ${nodeIdHeader} header (agents send it): add it`,
    });
    expect(await refusal({ authorization: `Bearer ${generateSecret('key')}` })).toMatchObject({
      status: 401,
      code: 'unauthenticated',
      message:
        'the API key is not valid: it was revoked, or mistyped (an admin can make one with llmgw ctl key create)',
    });
    const created = await api(tcp.url, tcp.adminKey, 'POST', '/keys', { name: 'app', role: 'user' });
    expect(created.status).toBe(201);
    expect(await refusal({ authorization: `Bearer ${created.body.secret as string}` })).toEqual({
      status: 403,
      code: 'permission_denied',
      message: `the mirror serves the cluster's nodes and admin keys; key "app" has the user role`,
    });
  });

  it('leaves the rest of the API as it was', async () => {
    expect((await api(tcp.url, undefined, 'GET', '/health')).status).toBe(200);
    const other = await api(tcp.url, tcp.adminKey, 'GET', '/mirrors');
    expect(other.status).toBe(404);
  });
});

describe("the mirror's index of the catalog", () => {
  it('serves the files of a model added through the API, by blob key, and nothing else', async () => {
    const tcp = await startControlPlane();
    try {
      const added = await api(tcp.url, tcp.adminKey, 'POST', '/models', {
        name: 'llama',
        source: `hf://${llamaGgufRepo}/${llamaGgufFile}`,
        profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
      });
      expect(added.status).toBe(201);
      const origin = (added.body as { status: { origin: Origin } }).status.origin;
      const key = blobKey(origin, origin.files[0]!);
      const auth = { authorization: `Bearer ${tcp.adminKey}` };
      const res = await fetch(`${tcp.url}${mirrorBlobsPath}${key}`, { headers: auth });
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(llamaGguf)).toBe(true);

      // Removed from the catalog: the mirror no longer serves it.
      expect((await api(tcp.url, tcp.adminKey, 'DELETE', '/models/llama')).status).toBe(200);
      const gone = await fetch(`${tcp.url}${mirrorBlobsPath}${key}`, { headers: auth });
      expect(gone.status).toBe(404);
      expect(((await gone.json()) as { error: { message: string } }).error.message).toMatch(
        /^no model in the catalog has a file with digest [0-9a-f]{64}/,
      );
    } finally {
      await tcp.stop();
    }
  });
});
