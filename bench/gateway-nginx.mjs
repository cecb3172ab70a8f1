// nginx as a plain reverse proxy in front of the bench's engines: the reference the
// gateway's figures are set against. Its config, prefix and logs live in a temp dir;
// it runs in the foreground as the bench's child.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

import { childrenOf, cpuSeconds, start } from './gateway-proc.mjs';

/** nginx on PATH (or where Debian puts it, /usr/sbin, often off a user's PATH); undefined if none. */
export function findNginx(env = process.env) {
  const dirs = [
    ...(env.PATH ?? '').split(delimiter).filter((d) => d !== ''),
    '/usr/sbin',
    '/usr/local/sbin',
    '/usr/local/nginx/sbin',
  ];
  for (const dir of dirs) {
    const bin = join(dir, 'nginx');
    if (existsSync(bin)) return bin;
  }
  return undefined;
}

/**
 * One worker process: the gateway is one Node event loop, so one nginx worker is the like
 * for like comparison of throughput and of CPU per request (`auto` would give nginx every
 * core of a machine that the load and the engine already share).
 */
export const nginxWorkers = 1;

/**
 * The config: one upstream and one location per mode, `/MODE/...` to `/...` of that
 * engine; HTTP/1.1 with keep-alive both ways; no buffering, so streams pass chunk by
 * chunk; no access log (llmgw's access lines are off in the bench too).
 */
export function nginxConfig({ prefix, port, upstreams, keepalive = 64 }) {
  const tmp = (name) => join(prefix, 'tmp', name);
  const lines = [
    `worker_processes ${nginxWorkers};`,
    `pid ${join(prefix, 'nginx.pid')};`,
    `error_log ${join(prefix, 'error.log')} warn;`,
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    `  client_body_temp_path ${tmp('body')};`,
    `  proxy_temp_path ${tmp('proxy')};`,
    `  fastcgi_temp_path ${tmp('fastcgi')};`,
    `  uwsgi_temp_path ${tmp('uwsgi')};`,
    `  scgi_temp_path ${tmp('scgi')};`,
    // Clients keep their connections for the whole run (nginx closes one after 1,000 requests by default).
    '  keepalive_requests 1000000;',
    '  keepalive_timeout 65s;',
  ];
  for (const [name, upstreamPort] of Object.entries(upstreams)) {
    lines.push(
      `  upstream ${name} {`,
      `    server 127.0.0.1:${upstreamPort};`,
      `    keepalive ${keepalive};`,
      '    keepalive_requests 1000000;',
      '  }',
    );
  }
  lines.push('  server {', `    listen 127.0.0.1:${port};`);
  for (const name of Object.keys(upstreams)) {
    lines.push(
      `    location /${name}/ {`,
      `      proxy_pass http://${name}/;`,
      '      proxy_http_version 1.1;',
      '      proxy_set_header Connection "";',
      '      proxy_buffering off;',
      '    }',
    );
  }
  lines.push('  }', '}', '');
  return lines.join('\n');
}

/** Starts nginx with that config under `prefix`; `cpuSeconds()` sums its master and workers. */
export function startNginx({ bin, prefix, port, upstreams, keepalive }) {
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'])
    mkdirSync(join(prefix, 'tmp', d), { recursive: true });
  const conf = join(prefix, 'nginx.conf');
  writeFileSync(conf, nginxConfig({ prefix, port, upstreams, keepalive }));
  const proc = start(bin, ['-c', conf, '-p', prefix, '-e', join(prefix, 'error.log'), '-g', 'daemon off;']);
  return {
    ...proc,
    conf,
    pids: () => [proc.pid, ...childrenOf(proc.pid)],
    cpuSeconds: () => [proc.pid, ...childrenOf(proc.pid)].reduce((sum, pid) => sum + cpuSeconds(pid), 0),
  };
}
