import { spawn } from 'node:child_process';
import { createServer } from 'node:net';

import { afterEach, describe, expect, it } from 'vitest';

import {
  describeHolder,
  findHolder,
  parseProcNetTcp,
  portUse,
  readListeners,
  socketInode,
  toRanges,
} from './sockets.js';

// As Linux 6.x writes them: a header, then one socket a line; 0A is LISTEN, 01 ESTABLISHED.
const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 100 0 0 10 0
   1: 00000000:4E21 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4720 1 000000004027d1df 100 0 0 10 0
   2: 0100007F:4E20 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:9E29 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0
`;
const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:4E22 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 6719 1 00000000b2265508 100 0 0 10 0
`;

describe('parseProcNetTcp', () => {
  it('reads the listening sockets of /proc/net/tcp and tcp6: port, inode, uid', () => {
    expect(parseProcNetTcp(tcp)).toEqual([
      { port: 20000, inode: 123456, uid: 1000 },
      { port: 20001, inode: 4720, uid: 0 },
    ]);
    expect(parseProcNetTcp(tcp6)).toEqual([{ port: 20002, inode: 6719, uid: 106 }]);
    expect(parseProcNetTcp('')).toEqual([]);
  });
});

describe('socketInode', () => {
  it.each([
    ['socket:[123456]', 123456],
    ['pipe:[25452]', undefined],
    ['/dev/null', undefined],
    ['socket:[x]', undefined],
  ])('%s', (link, inode) => {
    expect(socketInode(link)).toBe(inode);
  });
});

describe('toRanges', () => {
  it.each([
    [[], []],
    [[20000], [[20000, 20000]]],
    [
      [20005, 20000, 20001, 20001, 20002],
      [
        [20000, 20002],
        [20005, 20005],
      ],
    ],
  ])('%j', (ports, ranges) => {
    expect(toRanges(ports)).toEqual(ranges);
  });
});

describe('describeHolder', () => {
  it.each([
    [{ pid: 4242, name: 'python3' }, [], 'another program (pid 4242, python3)'],
    [
      undefined,
      [{ port: 1, inode: 2, uid: 1001 }],
      'another program (of uid 1001; this agent cannot see which)',
    ],
    [undefined, [], 'another program'],
  ])('%j', (holder, listeners, text) => {
    expect(describeHolder(holder, listeners)).toBe(text);
  });
});

describe('on this machine', () => {
  const servers: { close: () => void }[] = [];
  afterEach(() => {
    for (const s of servers.splice(0)) s.close();
  });

  it('tells a port this process listens on from one a child does, and names the holder', async () => {
    const mine = createServer();
    servers.push(mine);
    const port = await new Promise<number>((resolve) =>
      mine.listen(0, '127.0.0.1', () => {
        resolve((mine.address() as { port: number }).port);
      }),
    );
    expect(readListeners()?.some((l) => l.port === port)).toBe(true);
    expect(portUse(port, [process.pid])).toEqual({ ours: true, others: [] });

    const child = spawn(
      process.execPath,
      [
        '-e',
        "require('node:net').createServer().listen(0, '127.0.0.1', function () { console.log(this.address().port); })",
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    servers.push({ close: () => child.kill('SIGKILL') });
    const theirs = await new Promise<number>((resolve) =>
      child.stdout.once('data', (d: Buffer) => {
        resolve(Number(String(d).trim()));
      }),
    );
    const use = portUse(theirs, [process.pid]);
    expect(use?.ours).toBe(false);
    expect(use?.others).toHaveLength(1);
    expect(findHolder(new Set(use?.others.map((l) => l.inode)))).toEqual({ pid: child.pid, name: 'node' });
    expect(findHolder(new Set(use?.others.map((l) => l.inode)), new Set([child.pid ?? 0]))).toBeUndefined();
  });
});
