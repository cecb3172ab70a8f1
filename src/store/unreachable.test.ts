import { describe, expect, it } from 'vitest';

import { storeUnreachable } from './unreachable.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('storeUnreachable', () => {
  it.each([
    [withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'), true],
    [withCode('terminating connection due to administrator command', '57P01'), true],
    [withCode('the database system is starting up', '57P03'), true],
    [withCode('connection failure', '08006'), true],
    [new Error('Connection terminated unexpectedly'), true],
    [new Error('wrapped', { cause: new Error('timeout exceeded when trying to connect') }), true],
    [withCode('duplicate key value violates unique constraint', '23505'), false],
    [withCode('relation "x" does not exist', '42P01'), false],
    [new Error('something else'), false],
    ['not an error', false],
  ])('%s', (error, expected) => {
    expect(storeUnreachable(error)).toBe(expected);
  });
});
