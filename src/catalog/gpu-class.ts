/**
 * Device classes name what a replica needs: a whole card (`a100-80g`: model and
 * memory, lower case) or one MIG instance of a card (`a100-80g-mig-3g.40gb`: the
 * card's class and the instance profile, compute-instance splits such as
 * `1c.3g.71gb` included).
 */
const classPattern = /^(?<card>[a-z0-9]+-\d+g)(?:-mig-(?<profile>(?:\d+c\.)?\d+g\.\d+gb(?:\+me)?))?$/;

export interface GpuClass {
  /** The whole card's class: `a100-80g`. */
  card: string;
  /** The MIG profile, when the class is an instance: `3g.40gb`. */
  migProfile: string | undefined;
}

export function parseGpuClass(name: string): GpuClass | undefined {
  const m = classPattern.exec(name);
  if (m?.groups === undefined) return undefined;
  const card = m.groups['card'];
  if (card === undefined) return undefined;
  return { card, migProfile: m.groups['profile'] };
}

export function isMigClass(name: string): boolean {
  return parseGpuClass(name)?.migProfile !== undefined;
}

export function migClass(cardClass: string, profile: string): string {
  return `${cardClass}-mig-${profile}`;
}

/** Why a class name is not one, and what to write. */
export function gpuClassProblem(name: string): string | undefined {
  if (parseGpuClass(name) !== undefined) return undefined;
  const lower = name.toLowerCase().replace(/\s+/g, '');
  if (lower !== name && parseGpuClass(lower) !== undefined) return `write it in lower case: "${lower}"`;
  if (/^[a-z0-9]+$/.test(lower)) {
    return `"${name}" names a card but not its memory: write the model and memory, e.g. "${lower}-80g" (llmgw ctl nodes lists the classes your nodes have)`;
  }
  return (
    `"${name}" is not a device class: write the card's model and memory in lower case ` +
    `("a100-80g", "l4-24g"), or a MIG instance as card class, "-mig-" and profile ("a100-80g-mig-3g.40gb")`
  );
}
