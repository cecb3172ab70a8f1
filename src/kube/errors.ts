import { LlmgwError, messageOf, type ErrorCode } from '../core/errors.js';

/**
 * The API server's refusals in llmgw's words: its own message (a Status object's), and what
 * to do. A 403 names the verb and resource the control plane's ServiceAccount lacks and the
 * chart's Role that grants it. Pure: table-tested in errors.test.ts.
 */

export interface KubeAction {
  verb: 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';
  /** `deployments.apps`, `pods`, `leaderworkersets.leaderworkerset.x-k8s.io`. */
  resource: string;
  namespace?: string | undefined;
  name?: string | undefined;
}

/** The HTTP status and Status message of an error of the client library (ApiException), if it is one. */
export function apiStatus(e: unknown): { code: number; message: string } | undefined {
  if (typeof e !== 'object' || e === null || !('code' in e) || typeof e.code !== 'number') return undefined;
  const body = 'body' in e ? e.body : undefined;
  let message: string | undefined;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') message = parsed.message;
    } catch {
      message = body.slice(0, 300);
    }
  } else if (
    typeof body === 'object' &&
    body !== null &&
    'message' in body &&
    typeof body.message === 'string'
  ) {
    message = body.message;
  }
  // Without a Status body the library's message is `HTTP-Code: 401\nMessage: Unauthorized\n…`.
  message ??= /^Message: (.*)$/m.exec(messageOf(e))?.[1] ?? messageOf(e);
  return { code: e.code, message };
}

export function kubeError(e: unknown, action: KubeAction): LlmgwError {
  if (e instanceof LlmgwError) return e;
  const what = `${action.verb} ${action.resource}${action.name === undefined ? '' : ` ${action.name}`}${action.namespace === undefined ? '' : ` in namespace ${action.namespace}`}`;
  const status = apiStatus(e);
  if (status === undefined) {
    const text = messageOf(e);
    return new LlmgwError(
      'unavailable',
      `could not ${what}: the Kubernetes API did not answer (${text}): check kubernetes.kubeconfig and kubernetes.context, or the pod's service account when in the cluster`,
      { cause: e },
    );
  }
  const says = `the Kubernetes API says: ${status.message}`;
  const [code, todo]: [ErrorCode, string] =
    status.code === 401
      ? [
          'unavailable',
          'the credentials of kubernetes.kubeconfig (or the service account token) are not accepted: renew them',
        ]
      : status.code === 403
        ? [
            'unavailable',
            `llmgw's service account may not ${action.verb} ${action.resource}${action.namespace === undefined ? '' : ` in ${action.namespace}`}: grant it in the Role (or ClusterRole, for nodes) the Helm chart installs (deploy/helm/llmgw, templates/rbac.yaml), or with kubectl create role`,
          ]
        : status.code === 404 && action.resource.startsWith('leaderworkersets')
          ? [
              'unavailable',
              'install the LeaderWorkerSet CRD and controller (docs/kubernetes.md, "Multi-node profiles")',
            ]
          : status.code === 404
            ? [
                'not_found',
                action.namespace === undefined
                  ? 'it is not there'
                  : `check that namespace ${action.namespace} exists (kubernetes.namespace)`,
              ]
            : status.code === 409
              ? ['conflict', 'it changed meanwhile: llmgw tries again on its next pass']
              : status.code === 422
                ? [
                    'invalid_argument',
                    'the object llmgw made was refused: this is a bug of llmgw, please report it with this message',
                  ]
                : ['unavailable', 'llmgw tries again on its next pass'];
  return new LlmgwError(code, `could not ${what}: ${says} (${status.code}); ${todo}`, { cause: e });
}
