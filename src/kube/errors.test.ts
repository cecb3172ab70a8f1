import { describe, expect, it } from 'vitest';

import { kubeError } from './errors.js';

const api = (code: number, message: string) =>
  Object.assign(new Error('HTTP-Code'), { code, body: JSON.stringify({ kind: 'Status', message }) });

describe('kubeError', () => {
  it.each([
    [
      403,
      'deployments.apps is forbidden: User "system:serviceaccount:llmgw:llmgw" cannot create resource "deployments" in API group "apps" in the namespace "llmgw"',
      { verb: 'create', resource: 'deployments.apps', namespace: 'llmgw', name: 'llmgw-qwen-h100' } as const,
      'unavailable',
      'could not create deployments.apps llmgw-qwen-h100 in namespace llmgw: the Kubernetes API says: deployments.apps is forbidden: User "system:serviceaccount:llmgw:llmgw" cannot create resource "deployments" in API group "apps" in the namespace "llmgw" (403); llmgw\'s service account may not create deployments.apps in llmgw: grant it in the Role (or ClusterRole, for nodes) the Helm chart installs (deploy/helm/llmgw, templates/rbac.yaml), or with kubectl create role',
    ],
    [
      404,
      'the server could not find the requested resource',
      { verb: 'list', resource: 'leaderworkersets.leaderworkerset.x-k8s.io', namespace: 'llmgw' } as const,
      'unavailable',
      'could not list leaderworkersets.leaderworkerset.x-k8s.io in namespace llmgw: the Kubernetes API says: the server could not find the requested resource (404); install the LeaderWorkerSet CRD and controller (docs/kubernetes.md, "Multi-node profiles")',
    ],
    [
      404,
      'namespaces "llmgw" not found',
      { verb: 'list', resource: 'pods', namespace: 'llmgw' } as const,
      'not_found',
      'could not list pods in namespace llmgw: the Kubernetes API says: namespaces "llmgw" not found (404); check that namespace llmgw exists (kubernetes.namespace)',
    ],
  ])('%i: %s', (code, message, action, wantCode, want) => {
    const e = kubeError(api(code, message), action);
    expect(e.code).toBe(wantCode);
    expect(e.message).toBe(want);
  });

  it('says so when the API does not answer', () => {
    const e = kubeError(new Error('connect ECONNREFUSED 127.0.0.1:6443'), {
      verb: 'list',
      resource: 'nodes',
    });
    expect(e.message).toBe(
      "could not list nodes: the Kubernetes API did not answer (connect ECONNREFUSED 127.0.0.1:6443): check kubernetes.kubeconfig and kubernetes.context, or the pod's service account when in the cluster",
    );
  });
});
