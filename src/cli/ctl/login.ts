import type { Command } from 'commander';

import { ApiClient } from '../../client/api-client.js';
import { fingerprint } from '../../tls/certificates.js';
import { fetchTrusting, presentedChain } from '../../tls/trust.js';
import { stringOpt, type Runner } from '../command.js';
import { emit } from '../output.js';
import { UsageError } from '../usage-error.js';

import { defaultServer, readCaFile, repinHint } from './connection.js';
import { readLogin, saveLogin } from './login-file.js';

export function registerLogin(ctl: Command, run: Runner): void {
  ctl
    .command('login')
    .description(
      'check a server and key, and save them for the next llmgw ctl commands; on https, pin its CA on first use',
    )
    .option(
      '--ca <file>',
      'trust this CA (PEM; DATA_DIR/tls/ca.pem on a control plane) instead of pinning what the server shows',
    )
    .option(
      '--pin-again',
      "pin the server's current CA, replacing the one pinned before (after its certificates were replaced on purpose)",
    )
    .action(
      run.action(async ({ opts, o, conn }) => {
        const server = (conn.server ?? process.env['LLMGW_SERVER'] ?? defaultServer).replace(/\/+$/, '');
        const key = conn.key ?? process.env['LLMGW_KEY'];
        if (key === undefined || key === '')
          throw new UsageError('give the key: llmgw ctl login --server URL --key KEY (or set LLMGW_KEY)');
        const trust = await serverTrust(server, {
          caFile: stringOpt(opts, 'ca'),
          pinAgain: opts['pinAgain'] === true,
        });
        const me = await new ApiClient({
          server,
          key,
          ...(trust?.ca === undefined
            ? {}
            : { fetch: fetchTrusting(trust.ca, { repin: repinHint(server) }) }),
        }).whoami();
        const path = saveLogin({
          server,
          key,
          ...(trust?.ca === undefined ? {} : { ca: trust.ca }),
          ...(trust?.fingerprint === undefined ? {} : { fingerprint: trust.fingerprint }),
        });
        emit(
          o,
          {
            server,
            name: me.name,
            role: me.role,
            saved_to: path,
            ...(trust === undefined ? {} : { tls: trust }),
          },
          (d) =>
            [
              ...(d.tls === undefined
                ? []
                : [
                    `certificate SHA-256 fingerprint: ${d.tls.fingerprint}`,
                    d.tls.how === 'pinned'
                      ? `  trusted from now on: its CA (SHA-256 ${d.tls.caFingerprint}) is pinned; compare the fingerprint with the control plane's log ("serving HTTPS")`
                      : d.tls.how === 'given'
                        ? '  it chains to the CA given with --ca'
                        : d.tls.how === 'kept'
                          ? '  it chains to the CA pinned before'
                          : "  it chains to a CA this machine's system trusts",
                  ]),
              `logged in to ${d.server} as key "${d.name}" (${d.role}); saved to ${d.saved_to}`,
            ].join('\n'),
        );
      }),
    );
}

interface ServerTrust {
  /** The CA saved with the login; undefined when the system's CAs vouch for the server. */
  ca?: string;
  fingerprint: string;
  caFingerprint?: string;
  how: 'given' | 'kept' | 'pinned' | 'system';
}

/** How ctl trusts an https server: --ca, the CA pinned before, the system's CAs, else the CA it presents (pinned now). */
async function serverTrust(
  server: string,
  o: { caFile: string | undefined; pinAgain: boolean },
): Promise<ServerTrust | undefined> {
  if (!server.startsWith('https:')) return undefined;
  const leafOf = async (ca?: string) => {
    const chain = await presentedChain(server, { trust: ca === undefined ? {} : { ca } });
    return chain[0] === undefined ? 'unknown' : fingerprint(chain[0].toString());
  };
  if (o.caFile !== undefined) {
    const ca = readCaFile(o.caFile, '--ca');
    return {
      ca,
      fingerprint: await leafOf(ca).catch(() => 'unknown'),
      caFingerprint: fingerprint(ca),
      how: 'given',
    };
  }
  const saved = readLogin();
  if (!o.pinAgain && saved?.server === server && saved.ca !== undefined)
    // A certificate that no longer chains to it is refused by the request, naming both.
    return {
      ca: saved.ca,
      fingerprint: saved.fingerprint ?? 'unknown',
      caFingerprint: fingerprint(saved.ca),
      how: 'kept',
    };
  try {
    return { fingerprint: await leafOf(), how: 'system' };
  } catch {
    // Not vouched for by the system's CAs: the cluster's own CA, pinned on this first use.
  }
  const chain = await presentedChain(server);
  const top = chain.at(-1);
  const leaf = chain[0];
  if (top === undefined || leaf === undefined || !top.ca || !top.verify(top.publicKey))
    throw new UsageError(
      `${server} does not send the CA its certificate chains to, so there is nothing to pin: give it with llmgw ctl login --ca FILE`,
    );
  return {
    ca: top.toString(),
    fingerprint: fingerprint(leaf.toString()),
    caFingerprint: fingerprint(top.toString()),
    how: 'pinned',
  };
}
