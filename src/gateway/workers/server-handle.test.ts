import * as net from 'node:net';

import { describe, expect, it } from 'vitest';

import { LlmgwError } from '../../core/errors.js';

import { serverHandleFactory, type TcpHandle } from './server-handle.js';

describe('serverHandleFactory', () => {
  it('binds with the net module’s _createServerHandle when it has one, passing the address as given', () => {
    const calls: unknown[][] = [];
    const handle = { getsockname: () => 0, close: () => undefined };
    const create = serverHandleFactory(
      {
        _createServerHandle: (...args: unknown[]) => {
          calls.push(args);
          return handle;
        },
      },
      'v24.0.0',
    );
    expect(create('::', 8080, 6)).toBe(handle);
    expect(create('0.0.0.0', 0, 4)).toBe(handle);
    expect(calls).toEqual([
      ['::', 8080, 6],
      ['0.0.0.0', 0, 4],
    ]);
  });

  it('passes on the errno of an address that cannot be bound', () => {
    const create = serverHandleFactory({ _createServerHandle: () => -98 }, 'v22.12.0');
    expect(create('127.0.0.1', 80, 4)).toBe(-98);
  });

  it.each([
    ['no such function', {}],
    ['something else under its name', { _createServerHandle: 'gone' }],
  ])('refuses a Node with %s, naming the version and the fix', (_case, netModule) => {
    let thrown: unknown;
    try {
      serverHandleFactory(netModule, 'v26.1.0');
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(LlmgwError);
    expect((thrown as LlmgwError).code).toBe('not_implemented');
    expect((thrown as LlmgwError).message).toBe(
      "gateway workers need Node's net._createServerHandle, which Node v26.1.0 does not have: " +
        'set gateway.workers: 0 (the gateway then serves in the primary process), or run Node 22 or 24',
    );
  });

  // Fails on the Node this runs on if Node drops or changes the internal the workers rely on.
  it('binds a loopback port with the running Node, without listening on it', async () => {
    const create = serverHandleFactory(net, process.version);
    const handle = create('127.0.0.1', 0, 4);
    expect(typeof handle).toBe('object');
    const bound = handle as TcpHandle;
    try {
      const out: { port?: number } = {};
      expect(bound.getsockname(out)).toBe(0);
      expect(out.port).toBeGreaterThan(0);
      // Bound but not listening: a connection is refused.
      const refused = await new Promise<string | undefined>((resolve) => {
        const s = net.connect(out.port ?? 0, '127.0.0.1');
        s.once('connect', () => {
          s.destroy();
          resolve(undefined);
        });
        s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code));
      });
      expect(refused).toBe('ECONNREFUSED');
    } finally {
      bound.close();
    }
  });
});
