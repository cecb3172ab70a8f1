import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';

import type { RequestOptions as HttpsRequestOptions } from 'node:https';

import { messageOf } from '../core/errors.js';

import {
  classifyWatchFailure,
  SilentWatchError,
  WatchHealth,
  WatchStatusError,
  type WatchLogger,
} from './watch-health.js';

/**
 * An informer of our own: list, then watch from the list's resourceVersion with bookmarks, resume
 * from the last resourceVersion when the server ends a watch, list again after any failure.
 * Not client-node's ListWatch: it sends neither allowWatchBookmarks nor timeoutSeconds, its Watch
 * sets a 30 s abort signal and overwrites it on the next line (a dead connection is found only by
 * TCP keepalive), and after an error other than 410 it stops, leaving the restart to its user.
 * https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
 */

export interface WatchSettings {
  /** Sent as timeoutSeconds: the server ends each watch after it, and llmgw resumes it. */
  timeoutSeconds: number;
  /** A watch open past timeoutSeconds plus this is taken as dead: aborted, then list and watch again. */
  marginMs: number;
  /** The pause before a list and watch again after a failure. */
  retryMs: number;
}

export const defaultWatchSettings: WatchSettings = { timeoutSeconds: 300, marginMs: 30_000, retryMs: 2000 };

export interface ListResult<T> {
  items: T[];
  metadata?: { resourceVersion?: string };
}

export interface Informer<T> {
  list(): readonly T[];
  stop(): void;
}

export interface InformerOptions<T> {
  kc: KubeConfig;
  /** The collection's path: /api/v1/namespaces/NS/pods. */
  path: string;
  labelSelector?: string | undefined;
  /** For the log: `pods`, `deployments.apps`. */
  resource: string;
  /** Lists the collection; throws LlmgwError (kubeError) when the API refuses. */
  list: () => Promise<ListResult<T>>;
  settings: WatchSettings;
  log: WatchLogger;
  onChange: () => void;
}

interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

const key = (o: KubernetesObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/** Lists once (its refusal is thrown), then keeps the cache in step until stop(). */
export async function startInformer<T extends KubernetesObject>(o: InformerOptions<T>): Promise<Informer<T>> {
  let objects = new Map<string, T>();
  let rv = '';
  const life = new AbortController();
  const stopped = () => life.signal.aborted;
  let current: AbortController | undefined;
  let wake: (() => void) | undefined;
  const { timeoutSeconds, marginMs, retryMs } = o.settings;
  const health = new WatchHealth({ resource: o.resource, log: o.log, retryMs });

  const relist = async () => {
    const l = await o.list();
    if (stopped()) return;
    objects = new Map(l.items.map((i) => [key(i), i]));
    rv = l.metadata?.resourceVersion ?? '';
    o.onChange();
  };
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });

  /** One watch until the server ends it (resolves: resume) or it fails (throws: list again). */
  const watchOnce = async (): Promise<boolean> => {
    const server = o.kc.getCurrentCluster()?.server ?? '';
    const url = new URL(`${server.replace(/\/+$/, '')}${o.path}`);
    url.searchParams.set('watch', 'true');
    url.searchParams.set('resourceVersion', rv);
    url.searchParams.set('allowWatchBookmarks', 'true');
    url.searchParams.set('timeoutSeconds', String(timeoutSeconds));
    if (o.labelSelector !== undefined) url.searchParams.set('labelSelector', o.labelSelector);
    const controller = new AbortController();
    current = controller;
    const waited = timeoutSeconds + marginMs / 1000;
    const deadline = setTimeout(
      () => controller.abort(new SilentWatchError({ timeoutSeconds, waitedSeconds: waited })),
      waited * 1000,
    );
    let delivered = false;
    try {
      await streamWatch<T>(o.kc, url, controller.signal, (ev) => {
        delivered = true;
        health.working();
        const version = ev.object.metadata?.resourceVersion;
        if (version !== undefined && version !== '') rv = version;
        if (ev.type === 'BOOKMARK') return;
        if (ev.type === 'DELETED') objects.delete(key(ev.object));
        else objects.set(key(ev.object), ev.object);
        o.onChange();
      });
    } finally {
      clearTimeout(deadline);
    }
    return delivered;
  };

  await relist();
  void (async () => {
    let listFirst = false;
    while (!stopped()) {
      const started = Date.now();
      try {
        if (listFirst) await relist();
        listFirst = false;
        const delivered = await watchOnce();
        // The server's end of a watch: resume from the last resourceVersion. One ended at once
        // with nothing in it (a proxy that closes streams) waits, not to spin.
        if (delivered || Date.now() - started >= 1000) health.working();
        else await pause(retryMs);
      } catch (e) {
        if (stopped()) return;
        listFirst = true;
        const f = classifyWatchFailure(e);
        if (f.gone) continue;
        health.failed(f);
        await pause(retryMs);
      }
    }
  })();

  return {
    list: () => [...objects.values()],
    stop() {
      life.abort();
      current?.abort();
      wake?.();
    },
  };
}

/**
 * `GET PATH?watch=true`, one JSON event a line, with the kubeconfig's credentials and TLS settings
 * (applyToHTTPSOptions). Resolves when the server ends the stream; rejects on a refusal, an ERROR
 * event (its Status), a broken connection, or the signal (with its reason).
 */
async function streamWatch<T>(
  kc: KubeConfig,
  url: URL,
  signal: AbortSignal,
  onEvent: (e: WatchEvent<T>) => void,
): Promise<void> {
  const options: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  const { request } = url.protocol === 'http:' ? await import('node:http') : await import('node:https');
  signal.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (e?: unknown) => {
      if (settled) return;
      settled = true;
      req.destroy();
      if (e === undefined) resolve();
      else reject(e instanceof Error ? e : new Error(messageOf(e)));
    };
    const fail = (e: unknown) => settle(signal.aborted ? (signal.reason as unknown) : e);
    const req = request(url, { ...options, method: 'GET', signal }, (res) => {
      res.setEncoding('utf8');
      res.on('error', fail);
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (c: string) => (body += c));
        res.on('end', () => settle(new WatchStatusError(res.statusCode ?? 0, body)));
        return;
      }
      let buffer = '';
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (let i = buffer.indexOf('\n'); i >= 0 && !settled; i = buffer.indexOf('\n')) {
          const line = buffer.slice(0, i).trim();
          buffer = buffer.slice(i + 1);
          if (line === '') continue;
          let ev: WatchEvent<T>;
          try {
            ev = JSON.parse(line) as WatchEvent<T>;
          } catch {
            settle(new Error(`the watch sent a line that is not JSON: ${line.slice(0, 200)}`));
            return;
          }
          if (ev.type === 'ERROR') {
            const status = ev.object as { code?: unknown };
            const code = typeof status.code === 'number' ? status.code : 500;
            settle(new WatchStatusError(code, JSON.stringify(ev.object)));
          } else onEvent(ev);
        }
      });
      res.on('end', () => settle());
      res.on('close', () => fail(new Error('the watch connection closed before the end of its stream')));
    });
    // A peer that vanished is found sooner than by the deadline where the OS sends keepalives.
    req.on('socket', (s) => s.setKeepAlive(true, 30_000));
    req.on('error', fail);
    req.end();
  });
}
