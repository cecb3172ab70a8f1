import { describe, expect, it } from 'vitest';

import { endToEnd } from './relay.js';

describe('endToEnd', () => {
  it('drops the headers of one connection and keeps the rest', () => {
    expect(
      endToEnd({
        connection: 'keep-alive',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        upgrade: 'websocket',
        te: 'trailers',
        'content-type': 'application/json',
        'content-length': '2',
        'set-cookie': ['a=1', 'b=2'],
      }),
    ).toEqual({ 'content-type': 'application/json', 'content-length': '2', 'set-cookie': ['a=1', 'b=2'] });
  });
});
