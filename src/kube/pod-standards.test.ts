import { describe, expect, it } from 'vitest';

import type { KContainer, KPodSpec } from './kube-types.js';
import { standardProblems } from './pod-standards.js';

/** A pod that meets `restricted`: each case below breaks one rule of it. */
const ok = (): KPodSpec => ({
  securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
  containers: [
    {
      name: 'engine',
      image: 'x',
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    },
  ],
  volumes: [
    { name: 'shm', emptyDir: { medium: 'Memory' } },
    { name: 'models', persistentVolumeClaim: { claimName: 'm' } },
  ],
});
const engine = (spec: KPodSpec) => {
  const c = spec.containers[0];
  if (c === undefined) throw new Error('no container');
  return c;
};
const sc = (spec: KPodSpec): NonNullable<KContainer['securityContext']> =>
  (engine(spec).securityContext ??= {});
type Case = [string, (s: KPodSpec) => unknown, string];

describe('standardProblems', () => {
  it('finds nothing in a pod that meets restricted, and so baseline', () => {
    expect(standardProblems(ok(), 'restricted')).toEqual([]);
    expect(standardProblems(ok(), 'baseline')).toEqual([]);
  });

  it.each<Case>([
    // [what, how the pod is changed, the problem]
    ['host network', (s: KPodSpec) => (s.hostNetwork = true), 'hostNetwork is true'],
    ['host PID', (s: KPodSpec) => (s.hostPID = true), 'hostPID is true'],
    ['host IPC', (s: KPodSpec) => (s.hostIPC = true), 'hostIPC is true'],
    ['privileged', (s: KPodSpec) => (sc(s).privileged = true), 'container engine is privileged'],
    [
      'a hostPath volume',
      (s: KPodSpec) => s.volumes?.push({ name: 'dev', hostPath: { path: '/dev' } }),
      'volume dev is a hostPath',
    ],
    [
      'a host port',
      (s: KPodSpec) => (engine(s).ports = [{ containerPort: 8000, hostPort: 8000 }]),
      'container engine takes host port 8000',
    ],
    [
      'a capability baseline does not allow',
      (s: KPodSpec) => (sc(s).capabilities = { drop: ['ALL'], add: ['SYS_ADMIN'] }),
      'container engine adds capability SYS_ADMIN',
    ],
    [
      'seccomp unconfined',
      (s: KPodSpec) => (sc(s).seccompProfile = { type: 'Unconfined' }),
      'container engine has seccomp unconfined',
    ],
    [
      'an unsafe sysctl',
      (s: KPodSpec) =>
        (s.securityContext = { ...s.securityContext, sysctls: [{ name: 'kernel.msgmax', value: '1' }] }),
      'sysctl kernel.msgmax is not safe',
    ],
    [
      'an unmasked /proc',
      (s: KPodSpec) => (sc(s).procMount = 'Unmasked'),
      'container engine has procMount Unmasked',
    ],
    [
      'an SELinux type of the host',
      (s: KPodSpec) => (sc(s).seLinuxOptions = { type: 'spc_t' }),
      'container engine has SELinux type spc_t',
    ],
  ])('refuses %s at both levels', (_what, change, problem) => {
    const s = ok();
    change(s);
    expect(standardProblems(s, 'baseline')).toContain(problem);
    expect(standardProblems(s, 'restricted')).toContain(problem);
  });

  it.each<Case>([
    [
      'root allowed',
      (s: KPodSpec) => delete s.securityContext?.runAsNonRoot,
      'container engine may run as root (runAsNonRoot)',
    ],
    ['user 0', (s: KPodSpec) => (sc(s).runAsUser = 0), 'container engine runs as user 0'],
    [
      'privilege escalation',
      (s: KPodSpec) => delete sc(s).allowPrivilegeEscalation,
      'container engine does not set allowPrivilegeEscalation: false',
    ],
    [
      'capabilities kept',
      (s: KPodSpec) => (sc(s).capabilities = {}),
      'container engine does not drop ALL capabilities',
    ],
    [
      'an allowed capability beyond NET_BIND_SERVICE',
      (s: KPodSpec) => (sc(s).capabilities = { drop: ['ALL'], add: ['CHOWN'] }),
      'container engine adds capability CHOWN',
    ],
    [
      'no seccomp profile',
      (s: KPodSpec) => delete s.securityContext?.seccompProfile,
      'container engine has no RuntimeDefault or Localhost seccomp profile',
    ],
    [
      'a volume kind restricted does not list',
      (s: KPodSpec) => s.volumes?.push({ name: 'n', nfs: { server: 'x', path: '/' } }),
      'volume n is a nfs',
    ],
  ])('refuses %s at restricted only', (_what, change, problem) => {
    const s = ok();
    change(s);
    expect(standardProblems(s, 'restricted')).toContain(problem);
    expect(standardProblems(s, 'baseline')).toEqual([]);
  });

  it('checks init containers too', () => {
    const s = ok();
    s.initContainers = [{ name: 'download', image: 'y', securityContext: { privileged: true } }];
    expect(standardProblems(s, 'baseline')).toEqual(['container download is privileged']);
  });
});
