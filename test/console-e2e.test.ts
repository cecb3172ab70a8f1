/**
 * The console end to end, in a real browser: playwright-core drives Debian's chromium (no
 * browser download; .ci/run installs the package) against `llmgw up` serving the built console,
 * on a node whose GPU is a fake H100 in MIG mode and whose engine is the fake llama-server.
 * The run also takes the screenshots of docs/console.md (docs/console/*.png).
 */
import { accessSync, chmodSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { qwen25_7b, tinyTensors } from './fakes/gguf/models.js';
import { writeGguf } from './fakes/gguf/writer.js';
import { repoRoot, startDaemon, type Daemon } from './support/cli.js';
import { api } from './support/control-plane.js';
import { fakeNvidiaSmi } from './support/fake-gpu.js';
import { until } from './support/fleet.js';

/** Debian's package puts it at /usr/bin/chromium; LLMGW_CHROMIUM names another. */
function findChromium(): string | undefined {
  const named = process.env['LLMGW_CHROMIUM'];
  const candidates = [
    ...(named === undefined ? [] : [named]),
    ...(process.env['PATH'] ?? '').split(delimiter).map((d) => join(d, 'chromium')),
    '/usr/bin/chromium',
  ];
  return candidates.find((c) => {
    try {
      accessSync(c, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

const browserPath = findChromium();
const consoleBuilt = (() => {
  try {
    accessSync(join(repoRoot, 'dist', 'console', 'index.html'));
    return true;
  } catch {
    return false;
  }
})();
const adminKey = 'console-e2e-admin-key-0123456789abcdef';
const shots = join(repoRoot, 'docs', 'console');

let up: Daemon | undefined;
let url = '';
let dir = '';
let browser: Browser | undefined;
let userKey = '';

beforeAll(async () => {
  if (browserPath === undefined) return;
  if (!consoleBuilt)
    throw new Error('dist/console/index.html is missing: run npm run build before this test');
  dir = mkdtempSync(join(tmpdir(), 'llmgw-console-e2e-'));
  writeFileSync(join(dir, 'tiny.gguf'), writeGguf({ metadata: qwen25_7b, tensors: tinyTensors(64 * 1024) }));
  // The fake llama-server, answering slowly enough that the answer is seen streaming.
  const engine = join(dir, 'llama-server');
  writeFileSync(
    engine,
    `#!/bin/sh\nFAKE_ENGINE_TOKENS=24 FAKE_ENGINE_TOKEN_MS=25 exec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`,
  );
  chmodSync(engine, 0o755);
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    [
      'listen: 127.0.0.1:0',
      'agent:',
      '  heartbeat_ms: 300',
      '  stop_grace_s: 5',
      '  engines:',
      '    llamacpp:',
      `      bin: ${engine}`,
      '',
    ].join('\n'),
  );
  mkdirSync(shots, { recursive: true });
  up = startDaemon(
    ['up', '-c', config],
    {
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      LLMGW_DATA_DIR: join(dir, 'data'),
      LLMGW_ADMIN_KEY: adminKey,
      // The node's GPU: an H100 in MIG mode with three instances, as nvidia-smi prints it.
      LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
      LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
      FAKE_NVIDIA_SMI_FIXTURE: 'h100-mig-590',
    },
    dir,
  );
  url = (await up.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/))[1] ?? '';
  await until('the node of llmgw up, ready', async () => {
    const r = await api(url, adminKey, 'GET', '/nodes');
    return (r.body as { items: { state: string }[] }).items.find((n) => n.state === 'ready');
  });
  userKey = (await api(url, adminKey, 'POST', '/keys', { name: 'dev', role: 'user' })).body.secret as string;
  browser = await chromium.launch({
    executablePath: browserPath,
    headless: true,
    // Root in a container has no user namespaces for chromium's sandbox.
    args: ['--no-sandbox'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (up !== undefined) {
    const timer = setTimeout(() => up?.child.kill('SIGKILL'), 15_000);
    await up.stop('SIGTERM');
    clearTimeout(timer);
  }
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

async function signIn(page: Page, key: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Views' }).waitFor();
}

/** The Playground's model: tiny chosen, and served (its option says "(no ready replica)" until then). */
const tinyServed = async (page: Page) =>
  (await page.getByLabel('Model').locator('option:checked').textContent({ timeout: 200 })) === 'tiny';

/** Goes to a view through the navigation, as a user would. */
async function nav(page: Page, view: string): Promise<void> {
  await page
    .getByRole('navigation', { name: 'Views' })
    .getByRole('link', { name: view, exact: true })
    .click();
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

/**
 * Waits until `check` passes on the page. The live stream (GET /api/v1/events) updates the
 * views by itself where the control plane has it; where it has not, the page is reloaded
 * every 2 s, which a signed-in tab survives (the key is kept in sessionStorage).
 */
async function eventually(page: Page, what: string, check: () => Promise<boolean>, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    for (let i = 0; i < 8; i++) {
      if (await check().catch(() => false)) return;
      await page.waitForTimeout(250);
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} in the console`);
    await page.reload();
  }
}

const views = ['nodes', 'models', 'plan', 'replicas', 'keys', 'usage', 'audit', 'settings'];

describe.skipIf(browserPath === undefined)('the console in chromium, against llmgw up', () => {
  if (browserPath === undefined) {
    // Said once, in the run's output, rather than a silent skip.
    console.warn('console-e2e skipped: no chromium found (apt-get install chromium, or set LLMGW_CHROMIUM)');
  }

  it('an admin signs in, sees the MIG instances by class, adds a model from YAML that becomes ready, chats with it, changes its context, and creates and revokes a key', async () => {
    const context = await browser!.newContext({
      viewport: { width: 1280, height: 800 },
      colorScheme: 'light',
    });
    const page = await context.newPage();
    try {
      await page.goto(url);
      await page.getByLabel('API key').waitFor();
      await shoot(page, 'sign-in');
      await signIn(page, adminKey);

      // Overview: the node ready, its devices by class, each MIG instance's profile a class of its own.
      const devices = page.getByRole('table', { name: 'Devices by class, used and free' });
      await devices.waitFor();
      const migRows = devices.getByRole('row', { name: /h100-80g-mig-/ });
      await eventually(page, 'the MIG instances on the Overview', async () => (await migRows.count()) === 3);
      // Each row: the class, its kind, total, used, free (one instance runs a process of its own).
      const rows = await Promise.all(
        (await migRows.all()).map(async (r) =>
          [
            await r.getByRole('rowheader').textContent(),
            ...(await r.getByRole('cell').allTextContents()),
          ].join(' | '),
        ),
      );
      expect(rows).toEqual([
        'h100-80g-mig-1g.10gb | MIG 1g.10gb | 1 | 0 | 1',
        'h100-80g-mig-2g.20gb | MIG 2g.20gb | 1 | 0 | 1',
        'h100-80g-mig-3g.40gb | MIG 3g.40gb | 1 | 0 | 1 (1 held by other processes)',
      ]);

      // Models: add tiny from YAML, as `llmgw ctl model add -f` takes it, and watch it become ready.
      await nav(page, 'Models');
      await page.getByText('Add a model').click();
      await page
        .getByLabel(/^Model definition \(YAML/)
        .fill(
          [
            'name: tiny',
            `source: ${join(dir, 'tiny.gguf')}`,
            'profiles:',
            '  - name: cpu',
            '    engine: llamacpp',
            '    cpu: true',
            '',
          ].join('\n'),
        );
      await page.getByRole('button', { name: 'Add', exact: true }).click();
      await page
        .getByRole('status')
        .filter({ hasText: /^Added tiny\./ })
        .waitFor();
      await page.getByRole('table', { name: 'The catalog' }).getByRole('link', { name: 'tiny' }).click();
      await page.getByRole('heading', { level: 1, name: 'tiny' }).waitFor();
      const tinyReplicas = page.getByRole('table', { name: 'Replicas of tiny' });
      await eventually(page, 'a ready replica on the page of tiny', async () =>
        /^ready/.test(
          ((await tinyReplicas.getByRole('cell').nth(1).textContent({ timeout: 200 })) ?? '').trim(),
        ),
      );

      await nav(page, 'Overview');
      const ready = page.locator('.state-ready');
      await eventually(page, 'a ready replica of tiny on the Overview', async () =>
        /ready\s*1/i.test((await ready.textContent({ timeout: 200 })) ?? ''),
      );
      await shoot(page, 'overview');

      // The playground: a streamed answer from the fake engine, with its figures.
      await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Playground' }).click();
      await eventually(page, 'tiny served, in the Playground', async () => tinyServed(page));
      await page.getByLabel('System prompt').fill('Answer in one sentence.');
      await page.getByLabel('Temperature').fill('0.2');
      await page.getByLabel('Message').fill('What is llmgw?');
      await page.getByRole('button', { name: 'Send' }).click();
      // Streamed: text and its time to first token show while the answer is still coming, with Stop.
      const answer = page.locator('.turn-assistant');
      await answer.locator('.turn-figures', { hasText: /^answering… · time to first token/ }).waitFor();
      expect(((await answer.locator('.turn-text').textContent()) ?? '').length).toBeGreaterThan(0);
      expect(await page.getByRole('button', { name: 'Stop' }).isVisible()).toBe(true);
      await answer.locator('.turn-figures', { hasText: /^time to first token/ }).waitFor();
      const figures = (await answer.locator('.turn-figures').textContent()) ?? '';
      expect(figures).toMatch(/^time to first token \d+ ms · [\d.]+ tokens\/s · 24 tokens$/);
      expect(((await answer.locator('.turn-text').textContent()) ?? '').length).toBeGreaterThan(0);
      const curl = (await page.locator('.snippet', { hasText: 'curl' }).locator('pre').textContent()) ?? '';
      expect(curl).toContain(`${url}/v1/chat/completions`);
      expect(curl).toContain('Bearer $LLMGW_KEY');
      expect(await page.content()).not.toContain(adminKey);
      await shoot(page, 'playground');

      // tiny's page: Context… refuses a context past the trained one with the server's reason, then
      // applies a valid one (before → after); GPUs… on a CPU model shows the server's refusal.
      await nav(page, 'Models');
      await page.getByRole('table', { name: 'The catalog' }).getByRole('link', { name: 'tiny' }).click();
      await page.getByRole('button', { name: 'Context…' }).click();
      const contextDialog = page.getByRole('dialog', { name: 'Context of tiny' });
      const tokens = contextDialog.getByLabel('Tokens a request may use');
      await tokens.fill('65536');
      await contextDialog.getByRole('button', { name: 'Set the context' }).click();
      await contextDialog
        .getByRole('alert')
        .filter({ hasText: 'tiny was trained for a context of 32768 tokens' })
        .waitFor();
      await tokens.fill('8192');
      await contextDialog.getByRole('button', { name: 'Check with the planner' }).click();
      await contextDialog
        .getByRole('table', { name: 'Memory per card, before and after' })
        .getByRole('columnheader', { name: 'At 8192 tokens' })
        .waitFor();
      await contextDialog.getByRole('button', { name: 'Set the context' }).click();
      const changed = contextDialog.getByRole('status').filter({ hasText: /^Context .+ → 8192 tokens\./ });
      await changed.waitFor();
      expect(await contextDialog.getByRole('alert').count()).toBe(0);
      await shoot(page, 'model-context');
      await contextDialog.getByRole('button', { name: 'Close' }).click();
      await eventually(page, 'the context of tiny, 8192 tokens, on its page', async () =>
        /8192 tokens/.test((await page.locator('.facts').textContent({ timeout: 200 })) ?? ''),
      );

      await page.getByRole('button', { name: 'GPUs…' }).click();
      const gpusDialog = page.getByRole('dialog', { name: 'GPUs of tiny' });
      await gpusDialog
        .getByRole('alert')
        .filter({
          hasText: 'model "tiny" runs on CPUs only (profile "cpu"), on no card: give it a GPU profile',
        })
        .waitFor();
      await shoot(page, 'model-gpus');
      await gpusDialog.getByRole('button', { name: 'Close' }).click();
      // The new context rolls out: tiny ready again, the change done, before the user's chat.
      await eventually(
        page,
        'tiny ready again after its context change',
        async () =>
          (await page.locator('.rollout').count()) === 0 &&
          /^ready/.test(
            ((await tinyReplicas.getByRole('cell').nth(1).textContent({ timeout: 200 })) ?? '').trim(),
          ),
        30_000,
      );
      await shoot(page, 'model');

      // Keys: a new key's secret is shown once, then revoked it is refused and shown revoked.
      await nav(page, 'Keys');
      await page.getByLabel('Name').fill('ci-bot');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { name: 'Key ci-bot created' }).waitFor();
      const secret = await page.getByLabel('Secret of key ci-bot').inputValue();
      expect(secret.length).toBeGreaterThan(20);
      expect((await api(url, secret, 'GET', '/models')).status).toBe(200);
      await page.getByRole('button', { name: 'Done: I have copied it' }).click();
      await page.getByRole('button', { name: 'Create key' }).waitFor();
      expect(await page.content()).not.toContain(secret);
      const keyRow = page.getByRole('table', { name: 'API keys' }).getByRole('row', { name: /^ci-bot / });
      expect(await keyRow.getByRole('cell').nth(7).textContent()).toBe('no');
      await keyRow.getByRole('button', { name: 'Revoke ci-bot' }).click();
      await page
        .getByRole('group', { name: 'Revoke ci-bot' })
        .getByRole('button', { name: 'Revoke ci-bot' })
        .click();
      await eventually(page, 'ci-bot revoked in the Keys view', async () =>
        /by /.test((await keyRow.getByRole('cell').nth(7).textContent({ timeout: 200 })) ?? ''),
      );
      expect(await keyRow.getAttribute('class')).toBe('revoked');
      expect(await keyRow.getByRole('button', { name: 'Revoke ci-bot' }).count()).toBe(0);
      expect((await api(url, secret, 'GET', '/models')).status).toBe(401);

      // Every other view, as this branch has it.
      for (const v of views) {
        await page
          .getByRole('navigation', { name: 'Views' })
          .getByRole('link', { name: new RegExp(`^${v}$`, 'i') })
          .click();
        await page.getByRole('heading', { level: 1 }).waitFor();
        // A view's data in place of its "Loading …" lines (QueryError), before its picture.
        await page
          .getByText(/^Loading .*…$/)
          .first()
          .waitFor({ state: 'detached' });
        // Views whose content follows an action: tiny's plan, a replica's detail and live log.
        if (v === 'plan') {
          await page.getByRole('button', { name: 'Plan', exact: true }).click();
          await page.locator('.plan table').first().waitFor();
        }
        if (v === 'replicas') {
          await page
            .getByRole('button', { name: /^Show replica tiny-/ })
            .first()
            .click();
          await page.getByRole('heading', { level: 3, name: 'Log' }).waitFor();
        }
        await shoot(page, v);
      }
    } finally {
      await context.close();
    }
  });

  it('a user key sees no admin views, and chats; the console fits a phone, dark', async () => {
    const context = await browser!.newContext({ viewport: { width: 390, height: 844 }, colorScheme: 'dark' });
    const page = await context.newPage();
    try {
      await signIn(page, userKey);
      const nav = page.getByRole('navigation', { name: 'Views' });
      expect(await nav.getByRole('link').allTextContents()).toEqual([
        'Overview',
        'Nodes',
        'Models',
        'Plan',
        'Replicas',
        'Playground',
      ]);
      // An admin view's address is not one this key may see.
      await page.goto(`${url}/keys`);
      await page.getByRole('heading', { name: 'Not here' }).waitFor();
      await page.goto(url);
      await page.getByRole('table', { name: 'Devices by class, used and free' }).waitFor();
      // Nothing wider than the phone: the page does not scroll sideways.
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await shoot(page, 'overview-phone-dark');

      // A user key chats through the gateway too, and the Playground fits the phone.
      await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Playground' }).click();
      await eventually(page, 'tiny in the Playground', async () => tinyServed(page));
      await page.getByLabel('Message').fill('Hi');
      await page.getByLabel('Message').press('Enter');
      await page
        .locator('.turn-assistant .turn-figures', { hasText: /^time to first token .* 24 tokens$/ })
        .waitFor();
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await shoot(page, 'playground-phone-dark');
    } finally {
      await context.close();
    }
  });
});
