import { parseGpuClass, type GpuClass } from '../catalog/gpu-class.js';
import type { ExcludedCard } from '../gpu/types.js';
import { withClassesThatFit } from '../planner/index.js';

import { memoryMibOf, type ProfileFit, shortNeed } from './fit.js';
import type { Need } from './need.js';
import { cpuThreadsOn, type DeviceList, type NodeState, type PortRange } from './node-state.js';

/** Entries in one reason before the rest are counted: a reason stays short on a big cluster. */
const namedNodes = 5;
/** Device classes named in one reason. */
const namedClasses = 6;
/** Longest excluded-card reason quoted. */
const excludedReasonChars = 60;

export interface ReasonContext {
  /** Every node, in name order, after placement. */
  readonly states: readonly NodeState[];
  readonly ports: PortRange;
  readonly cpuThreads: number;
}

interface Detail {
  state: NodeState;
  text: string;
  /** Nodes closest to fitting come first. */
  score: number;
}

/**
 * Says why a profile cannot take one more replica, from the state placement ended in: what
 * was needed, then each node's shortfall. Nothing is freed while placing, so a need that
 * failed part-way still fails at the end, and these are the numbers `llmgw ctl nodes` shows.
 * With the planner's view of the profile (`fit`), devices too small for a replica say so; when
 * every device of the class is, the planner's reason is the answer, with the other classes of
 * the cluster where a replica would fit.
 * The function it returns remembers each answer: many models often share one need.
 */
export function explainer(ctx: ReasonContext): (need: Need, fit?: ProfileFit) => string {
  const said = new Map<string, string>();
  const parsed = new Map<string, GpuClass | undefined>();
  const classOf = (cls: string) => {
    if (!parsed.has(cls)) parsed.set(cls, parseGpuClass(cls));
    return parsed.get(cls);
  };
  let classes: Map<string, number> | undefined;
  const memory = () => (classes ??= classMemory(ctx.states));
  return (need, fit) => {
    const key = fit === undefined ? JSON.stringify(need) : `${JSON.stringify(need)}\u0000${fit.key}`;
    let text = said.get(key);
    if (text === undefined) {
      text = whyNot(need, ctx, { classOf, fit, memory });
      said.set(key, text);
    }
    return text;
  };
}

type ClassOf = (cls: string) => GpuClass | undefined;

interface Helpers {
  classOf: ClassOf;
  fit: ProfileFit | undefined;
  /** The largest memory (MiB) a node reports for each device class (cards and MIG instances). */
  memory: () => ReadonlyMap<string, number>;
}

function whyNot(need: Need, ctx: ReasonContext, h: Helpers): string {
  if (need.kind === 'refused') return need.reason;
  if (ctx.states.length === 0) return 'no ready node (no node has joined)';
  switch (need.kind) {
    case 'cards':
      return whyNotCards(need, ctx, h);
    case 'instance':
      return whyNotInstance(need.cls, ctx, h);
    case 'cpu':
      return whyNotCpu(need.memoryMib, ctx);
  }
}

function whyNotCards(
  { cls, perNode, nodes }: { cls: string; perNode: number; nodes: number },
  ctx: ReasonContext,
  h: Helpers,
): string {
  const classOf = h.classOf;
  const relevant = ctx.states.filter(
    (s) =>
      s.cards.has(cls) || migCardsOf(s, cls, classOf) > 0 || s.node.excluded.some((e) => e.class === cls),
  );
  if (relevant.length === 0) return `no node has ${cls} cards (${classesHere(ctx.states)})`;
  const small = tooSmall(relevant, (s) => s.cards.get(cls), h);
  if (small.all !== undefined) return small.all;
  if (!ctx.states.some((s) => s.node.ready)) return noReadyNode(relevant);

  const fits = (s: NodeState) =>
    s.node.ready &&
    !small.nodes.has(s) &&
    (s.cards.get(cls)?.free.length ?? 0) >= perNode &&
    s.freePorts >= 1;
  const what = perNode === 1 ? `a free ${cls} card` : `${perNode} free ${cls} cards`;
  const details: Detail[] = [];
  for (const s of relevant) {
    if (fits(s)) continue;
    const list = s.cards.get(cls);
    const whole = list?.devices.length ?? 0;
    const free = list?.free.length ?? 0;
    const parts: string[] = [];
    if (!s.node.ready) parts.push('not ready');
    else {
      const migCards = migCardsOf(s, cls, classOf);
      const smallText = small.nodes.get(s);
      if (whole === 0) {
        if (migCards > 0) parts.push('MIG mode, no whole cards');
      } else if (smallText !== undefined) parts.push(`cards too small (${smallText})`);
      else if (free >= perNode) parts.push(portShortfall(ctx.ports));
      else if (free === 0) parts.push(`${whole} of ${whole} in use`);
      else parts.push(`${free} free`);
      if (whole > 0 && migCards > 0) parts.push(`${migCards} in MIG mode`);
      const excluded = s.node.excluded.filter((e) => e.class === cls);
      if (excluded.length > 0) parts.push(excludedText(excluded));
    }
    // A node whose cards are too small is further from fitting than one whose cards are busy.
    details.push({ state: s, text: parts.join(', '), score: small.nodes.has(s) ? -1 : free });
  }
  if (nodes === 1) return `no ready node has ${what} (${listNodes(details)})`;

  const fitting = relevant.filter(fits);
  const head = `a replica needs ${nodes} ready nodes with ${what} each`;
  if (fitting.length >= nodes) {
    // Enough nodes, but the head needs a second port (the one the other ranks join at).
    const ports = fitting.map((s) => ({ state: s, text: `${s.freePorts} free port`, score: s.freePorts }));
    return `${head}, and none of the ${fitting.length} that have them has the 2 free ports the head needs (${listNodes(ports)})`;
  }
  const have =
    fitting.length === 0
      ? 'none has them'
      : `only ${fitting.length} ${fitting.length === 1 ? 'has' : 'have'} them`;
  return `${head}, and ${have} (${listNodes(details)})`;
}

function whyNotInstance(cls: string, ctx: ReasonContext, h: Helpers): string {
  const classOf = h.classOf;
  const parsed = classOf(cls);
  const card = parsed?.card ?? cls;
  const profile = parsed?.migProfile ?? cls;
  // Each list holds one class, so its profile is read from the class, not per device.
  const otherProfiles = (s: NodeState) => {
    const found = new Set<string>();
    for (const c of s.instances.keys()) {
      const other = classOf(c);
      if (c !== cls && other?.card === card && other.migProfile !== undefined) found.add(other.migProfile);
    }
    return [...found].sort();
  };
  const relevant = ctx.states.filter(
    (s) =>
      s.instances.has(cls) ||
      s.cards.has(card) ||
      otherProfiles(s).length > 0 ||
      s.node.excluded.some((e) => e.class === card),
  );
  if (relevant.length === 0) return `no node has ${cls} instances (${classesHere(ctx.states)})`;
  const small = tooSmall(relevant, (s) => s.instances.get(cls), h);
  if (small.all !== undefined) return small.all;
  if (!ctx.states.some((s) => s.node.ready)) return noReadyNode(relevant);

  const details: Detail[] = [];
  for (const s of relevant) {
    const list = s.instances.get(cls);
    const total = list?.devices.length ?? 0;
    const free = list?.free.length ?? 0;
    const smallText = small.nodes.get(s);
    if (s.node.ready && smallText === undefined && free >= 1 && s.freePorts >= 1) continue;
    const parts: string[] = [];
    if (!s.node.ready) parts.push('not ready');
    else {
      const others = otherProfiles(s);
      if (smallText !== undefined) parts.push(`instances too small (${smallText})`);
      else if (total > 0) parts.push(free > 0 ? portShortfall(ctx.ports) : `${total} of ${total} in use`);
      else if (others.length > 0) parts.push(`no ${profile} instances (has ${others.join(' and ')})`);
      else if (s.cards.has(card)) parts.push('MIG mode off');
      const excluded = s.node.excluded.filter((e) => e.class === card);
      if (excluded.length > 0) parts.push(excludedText(excluded));
    }
    details.push({ state: s, text: parts.join(', '), score: small.nodes.has(s) ? -1 : free });
  }
  return `no ready node has a free ${cls} instance (${listNodes(details)})`;
}

function whyNotCpu(memoryMib: number, ctx: ReasonContext): string {
  if (!ctx.states.some((s) => s.node.ready)) return noReadyNode(ctx.states);
  const fixed = ctx.cpuThreads > 0;
  const threads = fixed
    ? `${ctx.cpuThreads} free CPU ${ctx.cpuThreads === 1 ? 'thread' : 'threads'}`
    : 'half its CPU threads free';
  const details: Detail[] = [];
  for (const s of ctx.states) {
    const parts: string[] = [];
    const need = cpuThreadsOn(s, ctx.cpuThreads);
    const free = Math.max(0, s.threadsFree);
    if (!s.node.ready) parts.push('not ready');
    else if (s.node.cpus <= 0) parts.push('no CPUs reported');
    else {
      if (need > s.node.cpus) parts.push(`only ${s.node.cpus} CPUs`);
      else if (free < need)
        parts.push(fixed ? `${free} threads free` : `${free} threads free, needs ${need}`);
      if (s.memoryFree < memoryMib) parts.push(`${Math.max(0, s.memoryFree)} MiB of RAM free`);
      if (parts.length === 0 && s.freePorts < 1) parts.push(portShortfall(ctx.ports));
    }
    if (parts.length === 0) continue;
    details.push({ state: s, text: parts.join(', '), score: free });
  }
  return `no ready node has ${threads} and ${memoryMib} MiB of RAM (${listNodes(details)})`;
}

/**
 * The nodes whose devices of a class are too small for a replica (with the need against what
 * they give); when every node with such devices is, the planner's reason at the largest, and
 * the classes of the cluster where a replica would fit.
 */
function tooSmall(
  relevant: readonly NodeState[],
  listOf: (s: NodeState) => DeviceList | undefined,
  { fit, memory }: Helpers,
): { nodes: Map<NodeState, string>; all: string | undefined } {
  const nodes = new Map<NodeState, string>();
  if (fit === undefined) return { nodes, all: undefined };
  let having = 0;
  let largest = 0;
  for (const s of relevant) {
    const list = listOf(s);
    if (list === undefined || list.devices.length === 0) continue;
    having++;
    const mib = memoryMibOf(list);
    if (fit.fits(mib)) continue;
    largest = Math.max(largest, mib);
    nodes.set(s, shortNeed(fit.plan(mib)));
  }
  if (having === 0 || nodes.size < having) return { nodes, all: undefined };
  const reason = fit.explained(largest).reason ?? 'a replica does not fit';
  const elsewhere = [...memory()]
    .filter(([c, mib]) => c !== fit.cls && fit.surelyFits(mib, c))
    .map(([c]) => c)
    .sort();
  return { nodes, all: withClassesThatFit(reason, elsewhere) };
}

/** The largest memory (MiB) any node reports for each device class, cards and MIG instances. */
function classMemory(states: readonly NodeState[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of states) {
    for (const lists of [s.cards, s.instances]) {
      for (const [c, list] of lists) out.set(c, Math.max(out.get(c) ?? 0, memoryMibOf(list)));
    }
  }
  return out;
}

function noReadyNode(relevant: readonly NodeState[]): string {
  return `no ready node (${listNodes(relevant.map((s) => ({ state: s, text: 'not ready', score: 0 })))})`;
}

/** Cards of a whole-card class that are in MIG mode on a node (they show as instances). */
function migCardsOf(s: NodeState, cardClass: string, classOf: ClassOf): number {
  const cards = new Set<number>();
  for (const [c, list] of s.instances) {
    if (classOf(c)?.card === cardClass) for (const d of list.devices) cards.add(d.card);
  }
  return cards.size;
}

function portShortfall(ports: PortRange): string {
  return `no free port in ${ports.first}-${ports.last}`;
}

function excludedText(excluded: readonly ExcludedCard[]): string {
  const sorted = [...excluded].sort((a, b) => a.card - b.card);
  const count = sorted.length === 1 ? '1 card' : `${sorted.length} cards`;
  return `${count} excluded (${shorten(sorted[0]?.reason ?? '')})`;
}

/** The first clause of an operator-facing reason, at most excludedReasonChars long. */
export function shorten(reason: string): string {
  const cut = reason.split(/: |; /)[0]?.trim() ?? '';
  if (cut.length <= excludedReasonChars) return cut;
  // At a word boundary, without the punctuation before it.
  const head = cut.slice(0, excludedReasonChars);
  const space = head.lastIndexOf(' ');
  const words = space > 0 ? head.slice(0, space) : head.slice(0, excludedReasonChars - 1);
  return `${words.replace(/[\s,;:.]+$/, '')}…`;
}

function classesHere(states: readonly NodeState[]): string {
  const classes = new Set<string>();
  for (const s of states) {
    for (const c of s.cards.keys()) classes.add(c);
    for (const c of s.instances.keys()) classes.add(c);
  }
  if (classes.size === 0) return 'no node has GPUs';
  const sorted = [...classes].sort();
  const shown = sorted.slice(0, namedClasses).join(', ');
  return `classes here: ${sorted.length > namedClasses ? `${shown}, and ${sorted.length - namedClasses} more` : shown}`;
}

/**
 * `node-a: 1 free, node-b and 40 more: 0 of 8 in use, and 3 more`: nodes closest to fitting
 * first, then by name; nodes that say the same are one entry, so a big cluster reads short.
 */
function listNodes(details: Detail[]): string {
  const sorted = [...details].sort((a, b) => b.score - a.score || a.state.rank - b.state.rank);
  const groups = new Map<string, NodeState[]>();
  for (const d of sorted) {
    const group = groups.get(d.text);
    if (group === undefined) groups.set(d.text, [d.state]);
    else group.push(d.state);
  }
  const entries: string[] = [];
  let rest = 0;
  for (const [text, states] of groups) {
    if (entries.length === namedNodes) {
      rest += states.length;
      continue;
    }
    const first = states[0]?.node.name ?? '';
    const second = states[1]?.node.name ?? '';
    const who =
      states.length === 1
        ? first
        : states.length === 2
          ? `${first} and ${second}`
          : `${first} and ${states.length - 1} more`;
    entries.push(text === '' ? who : `${who}: ${text}`);
  }
  return rest === 0 ? entries.join(', ') : `${entries.join(', ')}, and ${rest} more`;
}
