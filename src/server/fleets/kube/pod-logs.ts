import { LlmgwError } from '../../../core/errors.js';
import type { KubeCluster } from '../../../kube/client.js';
import { engineContainer } from '../../../kube/manifests.js';
import { groupPods, podState } from '../../../kube/pod-views.js';
import type { LogOptions } from '../fleet.js';

/**
 * The engine container's log of a replica's pod (of its rank's pod, for a LeaderWorkerSet's
 * group), read through the API as kubectl logs does; a pod the scheduler has not placed has
 * none yet, and says why. `unknown` throws the fleet's answer for a replica not there.
 */
export async function podLogs(
  cluster: KubeCluster,
  id: string,
  options: LogOptions & { namespace: string; unknown: () => never },
): Promise<void> {
  const group = groupPods(cluster.pods()).find((g) => g.leader.metadata?.name === id);
  if (group === undefined) options.unknown();
  const pod = [group.leader, ...group.workers][options.rank];
  const name = pod?.metadata?.name;
  if (pod === undefined || name === undefined)
    throw new LlmgwError(
      'not_found',
      `replica ${id} has no rank ${options.rank} (its ${group.workers.length === 0 ? 'one pod is rank 0' : `pods are ranks 0 to ${group.workers.length}`})`,
    );
  const state = podState(pod);
  if (state.state === 'pending')
    throw new LlmgwError(
      'conflict',
      `replica ${id}'s pod ${name} is Pending: ${state.reason ?? 'waiting to be scheduled'}`,
    );
  // The engine waits on the downloader: the API's answer would be "waiting to start: PodInitializing".
  if (state.state === 'downloading')
    throw new LlmgwError(
      'conflict',
      `replica ${id}'s engine has not started: ${state.reason ?? 'its init container runs'}; its progress: kubectl -n ${options.namespace} logs ${name} -c download`,
    );
  const lines = lineSplitter();
  await cluster.podLog(name, {
    container: engineContainer,
    tail: options.tail,
    follow: options.follow,
    signal: options.signal,
    onText: (text) => options.onLines(lines.push(text)),
  });
  const rest = lines.end();
  if (rest.length > 0) options.onLines(rest);
}

/** Text in chunks as whole lines: push gives the lines a chunk completes, end the unfinished last one. */
export function lineSplitter(): { push(text: string): string[]; end(): string[] } {
  let partial = '';
  return {
    push(text) {
      const parts = (partial + text).split('\n');
      partial = parts.pop() ?? '';
      return parts;
    },
    end() {
      const rest = partial;
      partial = '';
      return rest === '' ? [] : [rest];
    },
  };
}
