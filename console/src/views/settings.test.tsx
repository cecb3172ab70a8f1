// @vitest-environment jsdom
import { cleanup, fireEvent, screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';

import { refusal, renderAs, scriptedApi, type Call } from './admin-test-kit.js';
import { Settings } from './settings.js';

afterEach(cleanup);

const file = ['listen: 0.0.0.0:8080', 'hub:', '  token: (hidden)', 'gateway:', '  timeout: 60s', ''].join(
  '\n',
);

function configAnswer(text: string, etag: string) {
  return new Response(text, {
    status: 200,
    headers: {
      'content-type': 'application/yaml; charset=utf-8',
      etag,
      'x-llmgw-config-path': '/etc/llmgw/config.yaml',
    },
  });
}

const editor = () => screen.getByLabelText<HTMLTextAreaElement>('Settings file (YAML)');

describe('Settings', () => {
  it("shows a refused save in the server's words above the editor, keeps the edit, and jumps to the line", async () => {
    const message =
      'invalid settings, nothing was applied:\n/etc/llmgw/config.yaml:5: gateway.timeout: expected a duration such as 30s';
    const { api, calls } = scriptedApi((c: Call) => {
      if (c.method === 'GET' && c.path === '/config') return configAnswer(file, '"abc"');
      if (c.method === 'PUT')
        return refusal(400, 'invalid_argument', message, [
          { path: 'gateway.timeout', message: 'expected a duration such as 30s', line: 5 },
        ]);
      return undefined;
    });
    renderAs(api, <Settings />);
    await screen.findByText('/etc/llmgw/config.yaml');
    expect(screen.getByText(/Secrets show as \(hidden\)/)).toBeTruthy();
    expect(screen.getByText('No changes')).toBeTruthy();
    expect(screen.getByRole('button', { name: 'Save' }).hasAttribute('disabled')).toBe(true);

    const edited = file.replace('60s', 'soon');
    fireEvent.change(editor(), { target: { value: edited } });
    expect(screen.getByText('Changed: 1 added, 1 removed lines')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Save' }));

    const alert = await screen.findByRole('alert');
    expect(within(alert).getByText(/nothing was applied/).textContent).toBe(message);
    // Above the editor, where the eye goes after Save.
    expect(alert.compareDocumentPosition(editor()) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(editor().value).toBe(edited);
    const put = calls.find((c) => c.method === 'PUT');
    expect(put?.body).toBe(edited);
    expect(put?.headers).toMatchObject({ 'content-type': 'application/yaml', 'if-match': '"abc"' });

    fireEvent.click(within(alert).getByRole('button', { name: 'Go to line 5' }));
    const el = editor();
    expect(el.value.slice(el.selectionStart, el.selectionEnd)).toBe('  timeout: soon');
  });

  it('saves with the version it read, says what was applied, and shows the file as it is now', async () => {
    let text = file;
    let etag = '"v1"';
    const { api, calls } = scriptedApi((c) => {
      if (c.method === 'GET') return configAnswer(text, etag);
      if (c.method === 'PUT') {
        text = c.body ?? '';
        etag = '"v2"';
        return {
          json: { changed: true, applied: ['gateway.timeout'], restart_required: [], overridden_by_env: [] },
        };
      }
      return undefined;
    });
    renderAs(api, <Settings />);
    await screen.findByText('/etc/llmgw/config.yaml');
    fireEvent.change(editor(), { target: { value: file.replace('60s', '90s') } });
    fireEvent.click(screen.getByText('Show the changes'));
    expect(screen.getByLabelText('Changes').textContent).toContain('-   timeout: 60s\n+   timeout: 90s\n');
    fireEvent.click(screen.getByRole('button', { name: 'Save' }));
    expect((await screen.findByRole('status')).textContent).toContain('Applied now: gateway.timeout');
    expect(calls.find((c) => c.method === 'PUT')?.headers['if-match']).toBe('"v1"');
    await screen.findByText('No changes');
    expect(editor().value).toBe(file.replace('60s', '90s'));
  });

  it("shows a stale version's refusal with what to do, keeping the text", async () => {
    const { api } = scriptedApi((c) => {
      if (c.method === 'GET') return configAnswer(file, '"v1"');
      if (c.method === 'PUT')
        return refusal(
          412,
          'precondition_failed',
          'the settings file changed since you read it: read it again (llmgw ctl config edit) and redo your change',
        );
      return undefined;
    });
    renderAs(api, <Settings />);
    await screen.findByText('/etc/llmgw/config.yaml');
    fireEvent.change(editor(), { target: { value: `${file}# mine\n` } });
    fireEvent.click(screen.getByRole('button', { name: 'Save' }));
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toContain('the settings file changed since you read it');
    expect(alert.textContent).toContain('Discard to load the file as it is now');
    expect(editor().value).toBe(`${file}# mine\n`);
  });

  it("shows a refusal to read the settings in the server's words", async () => {
    const { api } = scriptedApi(() =>
      refusal(403, 'permission_denied', 'key "ops" has the user role: this is for admin keys'),
    );
    renderAs(api, <Settings />);
    expect((await screen.findByRole('alert')).textContent).toBe(
      'Could not load the settings: key "ops" has the user role: this is for admin keys',
    );
  });
});
