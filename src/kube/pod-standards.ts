import type { KContainer, KPodSpec } from './kube-types.js';
import type { KSecurityContext } from './pod-security.js';

/**
 * A checker of the Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards)
 * for the fields a pod spec holds: what the namespace's `pod-security.kubernetes.io/enforce`
 * label would refuse, said per field. Annotations (the old AppArmor ones) are not read. Pure:
 * llmgw checks its own pods with it in tests.
 */

export type StandardLevel = 'baseline' | 'restricted';

/** Capabilities `baseline` lets a container add (Docker's defaults, less NET_RAW). */
const baselineCapabilities = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const safeSysctls = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ping_group_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);
const seLinuxTypes = new Set([
  '',
  'container_t',
  'container_init_t',
  'container_kvm_t',
  'container_engine_t',
]);
const restrictedVolumes = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

/** Why a pod spec does not meet the level; empty when it does. */
export function standardProblems(spec: KPodSpec, level: StandardLevel): string[] {
  const out: string[] = [];
  const pod = spec.securityContext;
  const containers: KContainer[] = [
    ...(spec.initContainers ?? []),
    ...spec.containers,
    ...((spec.ephemeralContainers ?? []) as KContainer[]),
  ];
  for (const key of ['hostNetwork', 'hostPID', 'hostIPC'] as const)
    if (spec[key] === true) out.push(`${key} is true`);
  if (pod?.windowsOptions?.hostProcess === true) out.push('the pod is a Windows host process');
  for (const v of spec.volumes ?? []) {
    if (v.hostPath !== undefined) out.push(`volume ${v.name} is a hostPath`);
    const kind = Object.keys(v).find((k) => k !== 'name');
    if (level === 'restricted' && kind !== undefined && !restrictedVolumes.has(kind))
      out.push(`volume ${v.name} is a ${kind}`);
  }
  for (const s of pod?.sysctls ?? []) if (!safeSysctls.has(s.name)) out.push(`sysctl ${s.name} is not safe`);
  out.push(...contextProblems('the pod', pod, level));
  if (pod?.appArmorProfile?.type === 'Unconfined') out.push('the pod has AppArmor unconfined');
  const podSeccomp = pod?.seccompProfile?.type;
  for (const c of containers) {
    const at = `container ${c.name}`;
    const sc = c.securityContext;
    if (sc?.privileged === true) out.push(`${at} is privileged`);
    if (sc?.windowsOptions?.hostProcess === true) out.push(`${at} is a Windows host process`);
    if (sc?.procMount !== undefined && sc.procMount !== 'Default')
      out.push(`${at} has procMount ${sc.procMount}`);
    if (sc?.appArmorProfile?.type === 'Unconfined') out.push(`${at} has AppArmor unconfined`);
    for (const p of c.ports ?? [])
      if (p.hostPort !== undefined && p.hostPort !== 0) out.push(`${at} takes host port ${p.hostPort}`);
    out.push(...contextProblems(at, sc, level));
    const add = sc?.capabilities?.add ?? [];
    for (const cap of add) {
      const allowed = level === 'restricted' ? cap === 'NET_BIND_SERVICE' : baselineCapabilities.has(cap);
      if (!allowed) out.push(`${at} adds capability ${cap}`);
    }
    if (level !== 'restricted') continue;
    if (sc?.allowPrivilegeEscalation !== false)
      out.push(`${at} does not set allowPrivilegeEscalation: false`);
    if (!(sc?.capabilities?.drop ?? []).includes('ALL')) out.push(`${at} does not drop ALL capabilities`);
    if (sc?.runAsNonRoot !== true && pod?.runAsNonRoot !== true)
      out.push(`${at} may run as root (runAsNonRoot)`);
    const seccomp = sc?.seccompProfile?.type ?? podSeccomp;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost')
      out.push(`${at} has no RuntimeDefault or Localhost seccomp profile`);
  }
  return out;
}

/** The rules a pod's and a container's securityContext share. */
function contextProblems(
  at: string,
  sc: Pick<KSecurityContext, 'seLinuxOptions' | 'seccompProfile' | 'runAsUser' | 'runAsNonRoot'> | undefined,
  level: StandardLevel,
): string[] {
  const out: string[] = [];
  const se = sc?.seLinuxOptions;
  if (se !== undefined) {
    if (!seLinuxTypes.has(se.type ?? '')) out.push(`${at} has SELinux type ${se.type ?? ''}`);
    if ((se.user ?? '') !== '' || (se.role ?? '') !== '') out.push(`${at} sets an SELinux user or role`);
  }
  if (sc?.seccompProfile?.type === 'Unconfined') out.push(`${at} has seccomp unconfined`);
  if (level === 'restricted') {
    if (sc?.runAsUser === 0) out.push(`${at} runs as user 0`);
    if (sc?.runAsNonRoot === false) out.push(`${at} sets runAsNonRoot: false`);
  }
  return out;
}
