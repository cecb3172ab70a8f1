import type { Command } from 'commander';

import type { Device } from '../../gpu/types.js';
import { percentDone, progressText } from '../../protocol/cache-views.js';
import type { ClusterStatus, NodeView } from '../../protocol/node-views.js';
import { stringOpt, type Runner } from '../command.js';
import { age, emit, table } from '../output.js';

import { parseDuration } from './durations.js';
import { publicKeyHash } from '../../tls/certificates.js';
import { joinTokenWithHash, presentedChain } from '../../tls/trust.js';

import { connect, trustedCa } from './connection.js';
import { readLogin } from './login-file.js';

export function registerNodes(ctl: Command, run: Runner): void {
  ctl
    .command('nodes')
    .description('list the nodes: state, last seen, devices by class, CPUs, RAM')
    .action(
      run.action(async ({ o, conn }) => {
        const nodes = await connect(conn).listNodes();
        emit(o, { items: nodes }, ({ items }) =>
          items.length === 0
            ? 'No nodes yet: make a join token with llmgw ctl node token, then run llmgw agent --server URL --token TOKEN on each machine.'
            : table(
                ['NAME', 'STATE', 'LAST SEEN', 'DEVICES', 'CPUS', 'RAM'],
                items.map((n) => [
                  n.name,
                  stateText(n),
                  age(n.last_seen),
                  devicesText(n),
                  String(n.host.cpus.count),
                  gib(n.host.memory.total_mib),
                ]),
              ),
        );
      }),
    );

  const node = ctl.command('node').description('show or remove a node, and make the tokens nodes join with');
  node
    .command('show')
    .argument('<name>', 'the node')
    .description(
      "a node's devices (id as card or card/migN, class, memory, temperature, power, utilisation, processes) and the cards it leaves out",
    )
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const n = await connect(conn).getNode(name);
        emit(o, n, nodeDetail);
      }),
    );
  node
    .command('rm')
    .aliases(['remove', 'delete'])
    .argument('<name>', 'the node')
    .description('remove a node: its agent is disconnected and must join again with a token')
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const r = await connect(conn).removeNode(name);
        emit(o, r, (v) => `node "${v.name}" removed`);
      }),
    );

  const token = node
    .command('token')
    .description('make a join token (shown once); `token revoke NAME` revokes one')
    .option('--name <name>', 'a name for the token (default: generated)')
    .option('--expires <duration>', 'how long it is valid: 30m, 24h, 7d (default: never expires)')
    .action(
      run.action(async ({ opts, o, conn }) => {
        const expires = stringOpt(opts, 'expires');
        const expiresIn = expires === undefined ? undefined : parseDuration(expires, '--expires');
        const client = connect(conn);
        const created = await client.createJoinToken({ name: stringOpt(opts, 'name'), expiresIn });
        // On https the token carries the hash of the CA this client trusts the server by: agents check it.
        const caHash = await clusterCaHash(client.server);
        const secret = joinTokenWithHash(created.secret, caHash);
        emit(
          o,
          {
            ...created,
            secret,
            ...(caHash === undefined ? {} : { ca_hash: caHash }),
            join: `llmgw agent --server ${client.server} --token ${secret}`,
          },
          (c) =>
            [
              `join token "${c.token.name}" created${c.token.expires_at === null ? '' : `, valid until ${c.token.expires_at}`}. It is shown only this once:`,
              '',
              `  ${c.secret}`,
              '',
              'On each machine to join, run:',
              '',
              `  ${c.join}`,
              '',
            ].join('\n'),
        );
      }),
    );
  token
    .command('revoke')
    .argument('<name>', 'the token')
    .description(
      'revoke a join token: no new node joins with it (nodes that joined keep their own credentials)',
    )
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const t = await connect(conn).revokeJoinToken(name);
        emit(o, t, (v) => `join token "${v.name}" revoked`);
      }),
    );
  node
    .command('tokens')
    .description('list join tokens')
    .option('--all', 'include revoked tokens')
    .action(
      run.action(async ({ opts, o, conn }) => {
        const tokens = await connect(conn).listJoinTokens(opts['all'] === true);
        emit(o, { items: tokens }, ({ items }) =>
          table(
            ['NAME', 'PREFIX', 'CREATED', 'EXPIRES', 'USES', 'LAST USED', 'REVOKED'],
            items.map((t) => [
              t.name,
              t.prefix,
              age(t.created_at),
              t.expires_at ?? 'never',
              String(t.uses),
              age(t.last_used_at),
              t.revoked_at === null ? '-' : age(t.revoked_at),
            ]),
          ),
        );
      }),
    );

  ctl
    .command('status')
    .description('the cluster in one screen: nodes by state, devices by class, free and used')
    .action(
      run.action(async ({ o, conn }) => {
        const s = await connect(conn).status();
        emit(o, s, (x) => statusText(x));
      }),
    );
}

function stateText(n: NodeView): string {
  return n.state === 'ready' ? 'Ready' : 'NotReady';
}

function gib(mib: number): string {
  return `${(mib / 1024).toFixed(mib >= 10 * 1024 ? 0 : 1)}Gi`;
}

function devicesText(n: NodeView): string {
  const entries = Object.entries(n.devices_by_class);
  const parts = entries.map(([cls, count]) => {
    const used = n.devices_in_use_by_class[cls] ?? 0;
    return `${count}×${cls}${used > 0 ? ` (${used} in use)` : ''}`;
  });
  if (n.excluded.length > 0)
    parts.push(`${n.excluded.length} card${n.excluded.length === 1 ? '' : 's'} left out`);
  return parts.length === 0 ? 'cpu' : parts.join(', ');
}

function memory(d: Device): string {
  return `${d.memory_used_mib}/${d.memory_total_mib} MiB`;
}

function nodeDetail(n: NodeView): string {
  const lines = [
    `Name:          ${n.name}`,
    `State:         ${stateText(n)}${n.reason === undefined ? '' : ` (${n.reason})`}`,
    `Last seen:     ${n.last_seen} (${age(n.last_seen)} ago)`,
    `Address:       ${n.address}`,
    `Agent:         ${n.agent_version}`,
    `Host:          ${n.host.hostname}, ${n.host.os}, ${n.host.arch}`,
    `CPUs:          ${n.host.cpus.count} × ${n.host.cpus.model}`,
    `Memory:        ${gib(n.host.memory.free_mib)} free of ${gib(n.host.memory.total_mib)}`,
    `Disk:          ${gib(n.host.disk.free_mib)} free of ${gib(n.host.disk.total_mib)} under ${n.host.disk.path}`,
    `Discovery:     ${n.discovery.method}${n.driver_version === undefined ? '' : `, driver ${n.driver_version}`}${n.cuda_version === undefined ? '' : `, CUDA ${n.cuda_version}`}`,
  ];
  for (const r of n.discovery.reasons) lines.push(`               (${r})`);
  lines.push('');
  if (n.devices.length === 0) lines.push('Devices:       none (CPU only)');
  else {
    lines.push('Devices:');
    lines.push(
      indent(
        table(
          ['ID', 'CLASS', 'MEMORY', 'TEMP', 'POWER', 'UTIL', 'PROCESSES'],
          n.devices.map((d) => [
            d.label,
            d.class,
            memory(d),
            d.temperature_c === undefined ? '-' : `${d.temperature_c}C`,
            d.power_w === undefined ? '-' : `${Math.round(d.power_w)}W`,
            d.utilization_pct === undefined ? '-' : `${d.utilization_pct}%`,
            d.processes.length === 0
              ? '-'
              : d.processes.map((p) => `${p.pid} ${p.name || '?'} (${p.memory_mib} MiB)`).join(', '),
          ]),
        ),
      ),
    );
  }
  if (n.excluded.length > 0) {
    lines.push('', 'Left out:');
    for (const x of n.excluded) lines.push(`  card ${x.card} (${x.class}): ${x.reason}`);
  }
  return lines.join('\n');
}

export function statusText(s: ClusterStatus, now = Date.now()): string {
  const lines = [
    `Nodes:    ${s.nodes.total} (${s.nodes.ready} ready, ${s.nodes.not_ready} not ready)`,
    `CPUs:     ${s.cpus}`,
    `Memory:   ${gib(s.memory_mib.free)} free of ${gib(s.memory_mib.total)}`,
    '',
  ];
  const cps = s.control_planes ?? [];
  if (cps.length > 0) {
    const leader = cps.find((c) => c.leader);
    lines.push(
      `Control planes: ${cps.length}, ${
        leader === undefined
          ? 'none leads now (one takes over within a lease: ha.lease_s)'
          : `${leader.id} leads since ${leader.leader_since ?? '?'} (term ${leader.term ?? '?'})`
      }`,
    );
    lines.push(
      indent(
        table(
          ['ID', 'URL', 'VERSION', 'ROLE', 'STATE', 'UP', 'SEEN'],
          cps.map((c) => [
            c.self ? `${c.id} (this one)` : c.id,
            c.url || '-',
            c.version,
            c.leader ? 'leader' : 'follower',
            c.state,
            age(c.started_at, now),
            `${age(c.seen_at, now)} ago`,
          ]),
        ),
      ),
      '',
    );
  }
  if (s.devices.length === 0) lines.push('Devices:  none (CPU only)');
  else {
    lines.push('Devices:');
    lines.push(
      indent(
        table(
          ['CLASS', 'TOTAL', 'USED', 'FREE', 'OTHER PROCESSES'],
          s.devices.map((d) => [
            d.class,
            String(d.total),
            String(d.used),
            String(d.free),
            d.other_processes === 0 ? '-' : `${d.other_processes} (busy, not llmgw's)`,
          ]),
        ),
      ),
    );
  }
  if (s.downloads !== undefined && s.downloads.length > 0) {
    lines.push('', 'Downloads:');
    lines.push(
      indent(
        table(
          ['NODE', 'MODEL', 'STATE', 'PROGRESS'],
          s.downloads.map((d) => [
            d.node,
            d.model,
            d.state === 'downloading' ? `downloading ${percentDone(d)}%` : d.state,
            progressText(d),
          ]),
        ),
      ),
    );
  }
  if (s.excluded.length > 0) {
    lines.push('', 'Cards left out:');
    for (const x of s.excluded) lines.push(`  ${x.node} card ${x.card}: ${x.reason}`);
  }
  return lines.join('\n');
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

/** The key hash of the CA an https server chains to: the one ctl trusts it by (LLMGW_CA, pinned), else the system's root. */
async function clusterCaHash(server: string): Promise<string | undefined> {
  if (!server.startsWith('https:')) return undefined;
  const saved = readLogin();
  const ca = trustedCa(
    server,
    process.env,
    saved?.server.replace(/\/+$/, '') === server ? saved.ca : undefined,
  );
  if (ca !== undefined) return publicKeyHash(ca);
  const top = (await presentedChain(server, { trust: {} })).at(-1);
  return top === undefined ? undefined : publicKeyHash(top.toString());
}
