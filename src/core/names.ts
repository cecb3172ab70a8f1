/**
 * Names of models, profiles and adapters become parts of host names, URLs, process
 * names and `MODEL:ADAPTER` ids, so they are held to RFC 1123 DNS labels.
 */
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function isDnsLabel(name: string): boolean {
  return dnsLabel.test(name);
}

/** The nearest DNS label to a name: `Qwen2.5_7B` becomes `qwen2-5-7b`. */
export function toDnsLabel(name: string): string {
  const label = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/g, '');
  return label === '' ? 'model' : label;
}

/** Why a name is not a DNS label, and the one to write instead. */
export function dnsLabelProblem(kind: string, name: string): string | undefined {
  if (isDnsLabel(name)) return undefined;
  return (
    `${kind} "${name}" is not a DNS label (lower-case letters, digits and '-', starting and ending ` +
    `with a letter or digit, at most 63 characters): write "${toDnsLabel(name)}" instead`
  );
}
