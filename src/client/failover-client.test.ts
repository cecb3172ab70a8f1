import { describe, expect, it } from 'vitest';

import { LlmgwError } from '../core/errors.js';

import type { ApiResponse } from './api-client.js';
import { FailoverClient, serverList, type Requester } from './failover-client.js';

const answering = (name: string, asked: string[]): Requester => ({
  request: <T>(_m: string, path: string) => {
    asked.push(`${name}${path}`);
    return Promise.resolve({ status: 200, headers: new Headers(), body: name as T } as ApiResponse<T>);
  },
});
const away = (name: string, asked: string[]): Requester => ({
  request: (_m: string, path: string) => {
    asked.push(`${name}${path}`);
    return Promise.reject(new LlmgwError('unavailable', `cannot reach the control plane at ${name}`));
  },
});

describe('FailoverClient', () => {
  it('asks the next control plane when one cannot be reached, and stays with the one that answered', async () => {
    const asked: string[] = [];
    const client = new FailoverClient([away('a', asked), answering('b', asked)]);
    expect((await client.request('GET', '/routes')).body).toBe('b');
    expect((await client.request('GET', '/routes')).body).toBe('b');
    expect(asked).toEqual(['a/routes', 'b/routes', 'b/routes']);
  });

  it('passes on a refusal (not a missing control plane) without asking another', async () => {
    const asked: string[] = [];
    const refusing: Requester = {
      request: () => Promise.reject(new LlmgwError('permission_denied', 'key "x" has the user role')),
    };
    const client = new FailoverClient([refusing, answering('b', asked)]);
    await expect(client.request('GET', '/routes')).rejects.toThrow('key "x" has the user role');
    expect(asked).toEqual([]);
  });

  it('says the last reason when none answers', async () => {
    const asked: string[] = [];
    const client = new FailoverClient([away('a', asked), away('b', asked)]);
    await expect(client.request('GET', '/routes')).rejects.toThrow('cannot reach the control plane at b');
  });
});

describe('serverList', () => {
  it.each([
    ['http://a:8080', ['http://a:8080']],
    ['https://a:8080, https://b:8080', ['https://a:8080', 'https://b:8080']],
    ['', '--server is empty: write http://HOST:8080 (several: URL1,URL2)'],
    [
      'http://a:8080,b:8080',
      '--server b:8080 is not a URL: write http://HOST:8080 or https://HOST:8080 (several: URL1,URL2)',
    ],
  ])('%s', (text, expected) => {
    expect(serverList(text)).toEqual(expected);
  });
});
