/**
 * `nvidia-smi -L`: the only output that names MIG devices by UUID and profile (the XML
 * of `-q -x` has neither).
 *
 *   GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-950792bf-…)
 *     MIG 3g.40gb     Device  0: (UUID: MIG-b3061c09-…)
 *
 * R450/R460 drivers wrote single spaces and a UUID naming the parent and the GI/CI ids
 * (`MIG 1g.5gb Device 0: (UUID: MIG-GPU-<uuid>/1/0)`), and older ones names without
 * the `NVIDIA ` prefix; both parse.
 */

export interface ListedInstance {
  /** `Device N`: the instance's index under its card. */
  index: number;
  profile: string;
  uuid: string;
  /** Only in the old `MIG-GPU-<uuid>/<gi>/<ci>` form, which carries them. */
  gpuInstanceId?: number;
  computeInstanceId?: number;
}

export interface ListedGpu {
  index: number;
  name: string;
  uuid: string;
  instances: ListedInstance[];
}

const gpuLine = /^GPU\s+(\d+):\s+(.*?)\s+\(UUID:\s*(\S+?)\)\s*$/;
// A profile name of 12+ characters may fill the padding before `Device`: no space required.
const migLine = /^\s+MIG\s+(\S+?)\s*Device\s+(\d+):\s+\(UUID:\s*(\S+?)\)\s*$/;
const oldMigUuid = /^MIG-GPU-[0-9a-fA-F-]+\/(\d+)\/(\d+)$/;

/** Lines that are neither (warnings some drivers print first) are skipped. */
export function parseSmiList(text: string): ListedGpu[] {
  const gpus: ListedGpu[] = [];
  for (const line of text.split(/\r?\n/)) {
    const g = gpuLine.exec(line);
    if (g !== null) {
      gpus.push({ index: Number(g[1]), name: g[2] ?? '', uuid: g[3] ?? '', instances: [] });
      continue;
    }
    const m = migLine.exec(line);
    const parent = gpus.at(-1);
    if (m === null || parent === undefined) continue;
    const uuid = m[3] ?? '';
    const instance: ListedInstance = { index: Number(m[2]), profile: m[1] ?? '', uuid };
    const ids = oldMigUuid.exec(uuid);
    if (ids !== null) {
      instance.gpuInstanceId = Number(ids[1]);
      instance.computeInstanceId = Number(ids[2]);
    }
    parent.instances.push(instance);
  }
  return gpus;
}
