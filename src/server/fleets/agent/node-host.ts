/** An IPv4 address as a client dials it: `::ffff:10.0.0.5` is 10.0.0.5; IPv6 in brackets. */
export function hostOf(address: string): string {
  const v4 = address.replace(/^::ffff:/, '');
  if (v4 === '::1') return '127.0.0.1';
  return v4.includes(':') ? `[${v4}]` : v4;
}
