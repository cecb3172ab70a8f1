import { CST, isAlias, isCollection, isPair, isScalar, Lexer, type Document, type Node } from 'yaml';

/**
 * Bounds on the shape of a YAML document that a person writes (the settings file, a model for
 * `llmgw ctl model add`), checked so that a hostile or broken one is refused in words at little
 * cost instead of costing the process its memory, its stack or its time. No such document nests
 * past a handful of levels, nor repeats more than a few values through aliases.
 */

/** Lists and mappings inside one another, block and flow together. */
export const maxYamlDepth = 64;
/** Values that aliases (`*name`) repeat in all, each counted with everything it holds. */
export const maxAliasValues = 10_000;

/** Where a document breaks a bound, and how. */
export interface YamlBoundProblem {
  line: number;
  /** 1-based. */
  column: number;
  message: string;
}

/** Zero-width tokens of the lexer: document mode, the end of a broken flow collection, a scalar's mark, a BOM. */
const zeroWidth = new Set(['\x02', '\x18', '\x1f', '\ufeff']);

/**
 * Where the text first nests more than `max` lists and mappings deep, before anything is
 * parsed: one pass of the lexer (no tree is built), stopping there. The parser recurses once
 * per level, so 100,000 levels cost it its stack and hundreds of MB; this costs neither.
 * Block nesting is read off indentation: a node more indented than the open one is inside
 * it; `- - x` opens one level per dash; a list may sit at its key's own indentation.
 */
export function yamlNestingProblem(text: string, max = maxYamlDepth): YamlBoundProblem | undefined {
  const open: { column: number; seq: boolean }[] = [];
  let flow = 0;
  let line = 1;
  let column = 0;
  /** Where the block node being written on this line starts: the key of `key: value`. */
  let nodeColumn: number | undefined;
  let scalarText = false;
  /** Where the last level opened: the bracket, the dash, the key. */
  let opened = 0;
  const enter = (at: number, seq: boolean) => {
    // What is open at a deeper column has ended; at this column, a key ends a mapping and the
    // list that was a key's value, a dash only a list (a list may be its key's value there).
    for (let top = open.at(-1); top !== undefined; top = open.at(-1)) {
      if (top.column > at || (top.column === at && (!seq || top.seq))) open.pop();
      else break;
    }
    open.push({ column: at, seq });
    opened = at;
    nodeColumn = undefined;
  };
  for (const token of new Lexer().lex(text)) {
    const start = column;
    const startLine = line;
    if (!zeroWidth.has(token)) {
      const lastBreak = token.lastIndexOf('\n');
      if (lastBreak < 0) column += token.length;
      else {
        for (let i = token.indexOf('\n'); i >= 0; i = token.indexOf('\n', i + 1)) line++;
        column = token.length - lastBreak - 1;
      }
    }
    // The text of a scalar follows its mark: whatever it reads like (`-`, `[`), it is text. One
    // over several lines (a block scalar, a folded plain one) ends the line it started on.
    if (scalarText) {
      scalarText = false;
      nodeColumn = token.includes('\n') ? undefined : (nodeColumn ?? start);
      continue;
    }
    const type = CST.tokenType(token);
    switch (type) {
      case 'scalar':
        scalarText = true;
        continue;
      case 'doc-start':
      case 'doc-end':
        open.length = 0;
        flow = 0;
        nodeColumn = undefined;
        continue;
      case 'newline':
        nodeColumn = undefined;
        continue;
      case 'space':
      case 'comment':
      case 'comma':
      case 'byte-order-mark':
      case 'doc-mode':
      case 'flow-error-end':
        continue;
      case 'flow-seq-start':
      case 'flow-map-start':
        if (flow === 0) nodeColumn ??= start;
        flow++;
        opened = start;
        break;
      case 'flow-seq-end':
      case 'flow-map-end':
        flow = Math.max(0, flow - 1);
        continue;
      case 'seq-item-ind':
        if (flow === 0) enter(start, true);
        break;
      case 'explicit-key-ind':
        if (flow === 0) enter(start, false);
        break;
      case 'map-value-ind':
        if (flow === 0) enter(nodeColumn ?? start, false);
        break;
      default:
        // An anchor, a tag, an alias, a quoted scalar, a block scalar's header: a node starts here.
        if (flow === 0) nodeColumn ??= start;
        continue;
    }
    if (open.length + flow > max) {
      return {
        line: startLine,
        column: opened + 1,
        message: `nests lists and mappings more than ${max} levels deep at column ${opened + 1}: no llmgw document needs that; flatten it`,
      };
    }
  }
  return undefined;
}

/**
 * The first alias that names no anchor before it, sits inside the value it repeats, or takes
 * the values aliases repeat past `max`. Each alias repeats its anchor's whole value, and
 * aliases of aliases multiply: nine lines can stand for a billion values (an "alias bomb"),
 * which whatever walks the value (validation, a copy) would then visit one by one.
 */
export function yamlAliasProblem(
  doc: Document,
  position: (offset: number) => { line: number; col: number },
  max = maxAliasValues,
): YamlBoundProblem | undefined {
  const anchors = new Map<string, Node>();
  const sizes = new Map<Node, number>();
  const inside = new Set<Node>();
  let repeated = 0;
  let found: { node: Node; message: string } | undefined;
  // Values in a node, aliases expanded; recursion is as deep as the document (bounded above).
  const size = (node: unknown): number => {
    if (found !== undefined) return 0;
    if (isAlias(node)) {
      const source = anchors.get(node.source);
      const name = node.source;
      if (source === undefined) {
        found = {
          node,
          message: `the alias *${name} names no anchor before it: put &${name} on the value it stands for, above the alias`,
        };
        return 0;
      }
      if (inside.has(source)) {
        found = {
          node,
          message: `the alias *${name} is inside the value &${name} it stands for, which would then hold itself: write the value out`,
        };
        return 0;
      }
      const n = sizes.get(source) ?? 1;
      repeated += n;
      if (repeated > max) {
        found = {
          node,
          message: `aliases repeat more than ${max} values by the alias *${name}: each alias stands for its anchor's whole value, and aliases of aliases multiply; write the values out`,
        };
      }
      return n;
    }
    if (isPair(node)) return size(node.key) + size(node.value);
    if (isCollection(node)) {
      // Anchored before its items: an alias among them is then seen to be inside it.
      if (node.anchor !== undefined) anchors.set(node.anchor, node);
      inside.add(node);
      let n = 1;
      for (const item of node.items) n += size(item);
      inside.delete(node);
      sizes.set(node, n);
      return n;
    }
    if (isScalar(node) && node.anchor !== undefined) {
      anchors.set(node.anchor, node);
      sizes.set(node, 1);
    }
    return 1;
  };
  size(doc.contents);
  if (found === undefined) return undefined;
  const { line, col } = position(found.node.range?.[0] ?? 0);
  return { line, column: col, message: found.message };
}
