import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { consoleCsp } from '../src/server/console-route.js';

import { startControlPlane, type TestControlPlane } from './support/control-plane.js';

const index =
  '<!doctype html><html><head><script type="module" src="/assets/index-Ab12.js"></script></head><body><div id="root"></div></body></html>';
const script = 'console.log("console");';

describe('the control plane serves the built console at /', () => {
  let base: string;
  let dir: string;
  let cp: TestControlPlane;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'llmgw-console-'));
    // A file beside the console's folder, which no path may reach.
    writeFileSync(join(base, 'secret.txt'), 'secret');
    dir = join(base, 'console');
    mkdirSync(join(dir, 'assets'), { recursive: true });
    writeFileSync(join(dir, 'index.html'), index);
    writeFileSync(join(dir, 'assets', 'index-Ab12.js'), script);
    writeFileSync(join(dir, 'assets', 'index-Cd34.css'), 'body{}');
    writeFileSync(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    cp = await startControlPlane({ consoleDir: dir });
  });
  afterAll(async () => {
    await cp.stop();
    rmSync(base, { recursive: true, force: true });
  });

  it('serves index.html at /, never cached, under a strict CSP', async () => {
    const res = await fetch(`${cp.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-security-policy')).toBe(consoleCsp);
    expect(consoleCsp).toContain("script-src 'self'");
    expect(consoleCsp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await res.text()).toBe(index);
  });

  it('serves hashed assets with their content type, cached for a year', async () => {
    const js = await fetch(`${cp.url}/assets/index-Ab12.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(await js.text()).toBe(script);
    const css = await fetch(`${cp.url}/assets/index-Cd34.css`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    await css.text();
    const svg = await fetch(`${cp.url}/favicon.svg`);
    expect(svg.headers.get('content-type')).toBe('image/svg+xml');
    expect(svg.headers.get('cache-control')).toBe('no-cache');
    await svg.text();
  });

  it("answers the console's own routes with index.html (SPA fallback), HEAD without a body", async () => {
    for (const path of ['/nodes', '/models/qwen', '/keys?x=1']) {
      const res = await fetch(`${cp.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toBe(index);
    }
    const head = await fetch(`${cp.url}/replicas`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(index)));
  });

  it('answers a missing asset with 404 and how to recover, not with index.html', async () => {
    const res = await fetch(`${cp.url}/assets/index-Old9.js`);
    expect(res.status).toBe(404);
    expect(await res.text()).toBe(
      'no console asset /assets/index-Old9.js: reload the page to load the current build\n',
    );
  });

  it('serves nothing outside its folder', async () => {
    // URLs normalise ../ away; an encoded slash reaches the server as typed, and decodes to ../.
    for (const path of ['/..%2fsecret.txt', '/assets/..%2f..%2fsecret.txt']) {
      const res = await fetch(`${cp.url}${path}`);
      expect(await res.text(), path).not.toBe('secret');
    }
  });

  it('leaves /api and /v1 to their own parts: the API still needs a key', async () => {
    const api = await fetch(`${cp.url}/api/v1/nodes`);
    expect(api.status).toBe(401);
    expect(((await api.json()) as { error: { message: string } }).error.message).toBe(
      'this route needs an API key: send the header "Authorization: Bearer KEY" (llmgw ctl login saves one)',
    );
    for (const path of ['/api', '/v1', '/v1/models', '/metrics']) {
      const res = await fetch(`${cp.url}${path}`);
      expect(res.status, path).toBe(404);
      expect(res.headers.get('content-type'), path).toBe('application/json');
      await res.text();
    }
    const post = await fetch(`${cp.url}/nodes`, { method: 'POST' });
    expect(post.status).toBe(404);
    await post.text();
  });
});

describe('without a built console', () => {
  it('/ says to run npm run build', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'llmgw-console-'));
    const cp = await startControlPlane({ consoleDir: empty });
    try {
      const res = await fetch(`${cp.url}/`);
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(await res.text()).toContain('run <code>npm run build</code> in its folder, then reload');
    } finally {
      await cp.stop();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
