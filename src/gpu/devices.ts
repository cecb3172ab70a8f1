import { migInstanceClass } from './classes.js';
import type { Card, Device, ExcludedCard, MigInstance } from './types.js';

/**
 * What placement can use on a node: each whole card, or in MIG mode each of its
 * instances, never both (a card in MIG mode cannot run a process outside an instance).
 *
 * Ids keep the two apart: a whole card is its index (0..999); an instance is
 * 1000 + 100 × card + instance, shown as `card/migN`.
 */

const migBase = 1000;
const perCard = 100;

export interface DeviceList {
  devices: Device[];
  /** Cards that offer nothing now, with what the operator can do about it. */
  excluded: ExcludedCard[];
}

export function devicesOf(cards: readonly Card[]): DeviceList {
  const devices: Device[] = [];
  const excluded: ExcludedCard[] = [];
  for (const card of cards) {
    const reason = exclusionReason(card);
    if (reason !== undefined) {
      excluded.push({ card: card.index, uuid: card.uuid, class: card.class, reason });
    } else if (card.mig?.current === true) {
      for (const instance of card.instances) devices.push(instanceDevice(card, instance));
    } else {
      devices.push(wholeCard(card));
    }
  }
  return { devices, excluded };
}

function exclusionReason(card: Card): string | undefined {
  const mig = card.mig;
  if (mig === undefined) return undefined;
  // A mode change waits for a reset, and a reset needs the card idle: placing work on it
  // now would keep the operator's change from ever happening.
  if (mig.pending !== mig.current) {
    return (
      `MIG mode change to ${mig.pending ? 'enabled' : 'disabled'} waits for a GPU reset: ` +
      `reset it (nvidia-smi -r -i ${card.index}) or reboot`
    );
  }
  if (mig.current && card.instances.length === 0) {
    return (
      'MIG mode with no instances carved: create some ' +
      `(nvidia-smi mig -i ${card.index} -cgi 9,9 -C) or turn MIG off (nvidia-smi -i ${card.index} -mig 0)`
    );
  }
  return undefined;
}

function wholeCard(card: Card): Device {
  const device: Device = {
    id: card.index,
    label: String(card.index),
    class: card.class,
    card: card.index,
    uuid: card.uuid,
    memory_total_mib: card.memory_total_mib,
    memory_used_mib: card.memory_used_mib,
    wear: card.wear,
    processes: card.processes,
  };
  if (card.temperature_c !== undefined) device.temperature_c = card.temperature_c;
  if (card.power_w !== undefined) device.power_w = card.power_w;
  if (card.utilization_pct !== undefined) device.utilization_pct = card.utilization_pct;
  return device;
}

/** Heat, power and wear are the card's; memory and processes the instance's; no utilization. */
function instanceDevice(card: Card, instance: MigInstance): Device {
  const id = migDeviceId(card.index, instance.index);
  const device: Device = {
    id,
    label: deviceLabel(id),
    class: migInstanceClass(card.class, instance.profile),
    card: card.index,
    uuid: instance.uuid,
    mig: {
      profile: instance.profile,
      instance: instance.index,
      gpu_instance_id: instance.gpu_instance_id,
      compute_instance_id: instance.compute_instance_id,
    },
    memory_total_mib: instance.memory_total_mib,
    memory_used_mib: instance.memory_used_mib,
    wear: card.wear,
    processes: instance.processes,
  };
  if (card.temperature_c !== undefined) device.temperature_c = card.temperature_c;
  if (card.power_w !== undefined) device.power_w = card.power_w;
  return device;
}

/** Card 1, instance 2: 1102. */
export function migDeviceId(card: number, instance: number): number {
  return migBase + perCard * card + instance;
}

/** 0: `0`; 1102: `1/mig2`. */
export function deviceLabel(id: number): string {
  if (id < migBase) return String(id);
  const card = Math.floor((id - migBase) / perCard);
  return `${card}/mig${(id - migBase) % perCard}`;
}

/** `0`: 0; `1/mig2`: 1102; anything else: undefined. */
export function parseDeviceLabel(label: string): number | undefined {
  const m = /^(\d{1,3})(?:\/mig(\d{1,2}))?$/.exec(label.trim());
  if (m === null) return undefined;
  const card = Number(m[1]);
  const instance = m[2];
  if (instance === undefined) return card < migBase ? card : undefined;
  return migDeviceId(card, Number(instance));
}
