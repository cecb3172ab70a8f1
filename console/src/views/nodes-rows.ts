/** The Nodes view's logic, pure: a node's devices as rows, memory bars' numbers, its warnings. */
import type { Device, NodeView } from '../api.js';

/** A memory bar: how full, and its words (`61,440 / 81,920 MiB`). */
export interface MemoryBar {
  used: number;
  total: number;
  /** 0 to 100, whole. */
  pct: number;
  /** high: 90 % or more, the next replica may not fit. */
  level: 'ok' | 'high';
  text: string;
}

const mib = new Intl.NumberFormat('en-US');

export function memoryBar(used: number, total: number): MemoryBar {
  // A driver may report used above total for a moment (reserved memory): the bar stops at full.
  const pct = total <= 0 ? 0 : Math.min(100, Math.max(0, Math.round((used / total) * 100)));
  return {
    used,
    total,
    pct,
    level: pct >= 90 ? 'high' : 'ok',
    text: `${mib.format(used)} / ${mib.format(total)} MiB`,
  };
}

export interface DeviceRow {
  /** `0`, or `0/mig1`. */
  id: string;
  class: string;
  /** `card`, or `MIG 3g.40gb`. */
  kind: string;
  memory: MemoryBar;
  temperature: string;
  power: string;
  /** Absent on MIG instances, where the driver does not measure it: said, not shown as 0. */
  utilisation: string;
  processes: string[];
}

/** What a table cell shows for a figure the driver did not give. */
export const unknown = '—';

export function deviceRow(d: Device): DeviceRow {
  return {
    id: d.label,
    class: d.class,
    kind: d.mig === undefined ? 'card' : `MIG ${d.mig.profile}`,
    memory: memoryBar(d.memory_used_mib, d.memory_total_mib),
    temperature: d.temperature_c === undefined ? unknown : `${d.temperature_c} °C`,
    power: d.power_w === undefined ? unknown : `${Math.round(d.power_w)} W`,
    utilisation:
      d.utilization_pct !== undefined
        ? `${d.utilization_pct} %`
        : d.mig === undefined
          ? unknown
          : 'not measured on MIG',
    processes: d.processes.map(
      (p) => `${p.pid} ${p.name === '' ? '?' : p.name} (${mib.format(p.memory_mib)} MiB)`,
    ),
  };
}

export interface NodeWarning {
  message: string;
  /** The node cannot serve on this card (or at all) until it is fixed. */
  blocking: boolean;
}

/**
 * What `llmgw doctor` would warn of on this node, from what its agent reports: cards left out,
 * worn cards (one warning per card, though each of its MIG instances carries its wear), and GPU
 * discovery that found nothing. The doctor's engine and connection checks run on the node only.
 */
export function nodeWarnings(n: NodeView): NodeWarning[] {
  const out: NodeWarning[] = [];
  if (n.discovery.method === 'none' && n.discovery.reasons.length > 0) {
    out.push({
      message: `no GPU found (${n.discovery.reasons.join('; ')}): run llmgw doctor on the node if it has cards`,
      blocking: false,
    });
  }
  for (const x of n.excluded) {
    out.push({ message: `card ${x.card} (${x.class}) can run nothing: ${x.reason}`, blocking: true });
  }
  const seen = new Set<number>();
  for (const d of n.devices) {
    if (seen.has(d.card)) continue;
    seen.add(d.card);
    const cls = d.mig === undefined ? d.class : d.class.replace(/-mig-.*$/, '');
    if (d.wear.remapped_rows_pending === true)
      out.push({
        message: `card ${d.card} (${cls}) has remapped memory rows waiting for a reset: reset it (nvidia-smi -r -i ${d.card}) when it is idle`,
        blocking: false,
      });
    if (d.wear.remapped_rows_failure === true)
      out.push({
        message: `card ${d.card} (${cls}) failed to remap a memory row: it needs service; drain it`,
        blocking: false,
      });
    if ((d.wear.ecc_uncorrectable ?? 0) > 0)
      out.push({
        message: `card ${d.card} (${cls}) has had ${d.wear.ecc_uncorrectable ?? 0} uncorrectable ECC errors: watch it, and drain it if the count grows`,
        blocking: false,
      });
  }
  return out;
}

/** `42s`, `5m`, `3h`, `2d` ago, as ctl prints ages. */
export function age(iso: string | undefined, now: number): string {
  if (iso === undefined) return unknown;
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** What to run on a machine to join it, as `ctl node token` prints it. */
export function joinCommand(server: string, secret: string): string {
  return `llmgw agent --server ${server} --token ${secret}`;
}

/** Expiry choices of the token dialog, in seconds (undefined: never). */
export const expiryChoices: { label: string; seconds: number | undefined }[] = [
  { label: 'Never', seconds: undefined },
  { label: '1 hour', seconds: 3600 },
  { label: '24 hours', seconds: 86400 },
  { label: '7 days', seconds: 7 * 86400 },
  { label: '30 days', seconds: 30 * 86400 },
];
