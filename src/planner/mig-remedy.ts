import { parseGpuClass } from '../catalog/gpu-class.js';
import { classMemoryBytes, migClassesOf } from './class-memory.js';
import type { PlanInput } from './plan-input.js';
import type { MemoryPlan } from './types.js';

/**
 * What would hold a replica that a MIG instance does not. A replica runs on one instance, so
 * more of them is no remedy: the card's larger profiles are (those of the least memory that
 * hold it, the rest being larger still), and the whole card. Each is planned as this one, at
 * the same context, and named only when it fits with nothing left unknown. Empty when none
 * does or the device is no MIG instance; `plan` is planProfile, passed in to keep the import
 * one way.
 */
export function migRemedies(input: PlanInput, plan: (input: PlanInput) => MemoryPlan): string[] {
  const { device } = input;
  if ('cpu' in device) return [];
  const cls = parseGpuClass(device.class);
  if (cls?.migProfile === undefined) return [];
  const holds = (name: string, memoryBytes: number): boolean => {
    const p = plan({ ...input, device: { class: name, memoryBytes }, maxCards: 0 });
    return p.fits && p.checked;
  };

  // +me profiles have the memory of their plain one: naming them adds nothing.
  const larger = migClassesOf(cls.card)
    .filter((c) => !c.endsWith('+me'))
    .map((c) => ({ name: c, bytes: classMemoryBytes(c) ?? NaN }))
    .filter((c) => c.bytes > device.memoryBytes)
    .sort((a, b) => a.bytes - b.bytes);
  const profiles: string[] = [];
  let least = Infinity;
  for (const c of larger) {
    if (c.bytes > least) break;
    if (!holds(c.name, c.bytes)) continue;
    profiles.push(c.name);
    least = c.bytes;
  }

  const out: string[] = [];
  if (profiles.length > 0) out.push(`a larger MIG profile such as ${profiles.join(' or ')}`);
  const whole = classMemoryBytes(cls.card);
  if (whole !== undefined && whole > device.memoryBytes && holds(cls.card, whole))
    out.push(`a whole ${cls.card} card`);
  return out;
}
