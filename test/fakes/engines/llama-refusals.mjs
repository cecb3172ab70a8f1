// What llama-server answers 500 to, though the request is at fault: its JSON library
// (nlohmann::json) throws on bytes that are not UTF-8, on an unpaired \uD800-\uDFFF escape
// and on a number past a double, and its chat parsing (common/chat.cpp, the server's
// utils) throws std::runtime_error on tools it cannot read and on an image for a model
// started without its projector; the server answers every such exception 500 server_error,
// as capture 26 shows for a parse error. The messages are the library's and the server's.
import { isUtf8 } from 'node:buffer';

/** The request body as it came, bytes and all. */
export function readRaw(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

const parseError = (column, why) =>
  `[json.exception.parse_error.101] parse error at line 1, column ${column}: syntax error while parsing value - ${why}`;

/** The first unpaired surrogate escape in a JSON text: its offset and which half it is. */
function loneSurrogate(text) {
  for (let i = text.indexOf('\\'); i >= 0 && i < text.length; i = text.indexOf('\\', i)) {
    if (text[i + 1] !== 'u') {
      i += 2;
      continue;
    }
    const unit = parseInt(text.slice(i + 2, i + 6), 16);
    if (unit >= 0xdc00 && unit <= 0xdfff) return { at: i, high: false };
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.slice(i + 6, i + 8) === '\\u' ? parseInt(text.slice(i + 8, i + 12), 16) : NaN;
      if (!(next >= 0xdc00 && next <= 0xdfff)) return { at: i, high: true };
      i += 12;
      continue;
    }
    i += 6;
  }
  return undefined;
}

function finite(v) {
  if (typeof v === 'number') return Number.isFinite(v);
  if (typeof v !== 'object' || v === null) return true;
  return Object.values(v).every(finite);
}

/**
 * The body as llama-server reads it: `{body}`, or `{error}` (its 500 message) when its JSON
 * library would throw. `body` is then the parsed value, whatever its type.
 */
export function llamaParse(raw) {
  if (!isUtf8(raw)) {
    const at = raw.toString('utf8').indexOf('\ufffd');
    return { error: parseError(at + 1, `invalid string: ill-formed UTF-8 byte; last read: '"'`) };
  }
  const text = raw.toString('utf8');
  const lone = loneSurrogate(text);
  if (lone !== undefined)
    return {
      error: parseError(
        lone.at + 7,
        lone.high
          ? `invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; last read: '"${text.slice(lone.at, lone.at + 6)}'`
          : `invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF; last read: '"${text.slice(lone.at, lone.at + 6)}'`,
      ),
    };
  let body;
  try {
    body = JSON.parse(text);
  } catch (e) {
    const at = /position (\d+)/.exec(String(e.message));
    return { error: parseError(at ? Number(at[1]) + 1 : text.length + 1, e.message) };
  }
  if (!finite(body)) {
    const literal = (text.match(/-?\d+(?:\.\d+)?[eE][+-]?\d+|\d{309,}/g) ?? []).find(
      (n) => !Number.isFinite(Number(n)),
    );
    return { error: `[json.exception.out_of_range.406] number overflow parsing '${literal ?? 'inf'}'` };
  }
  return { body };
}

function toolsProblem(tools) {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) return `Expected 'tools' to be an array, got ${JSON.stringify(tools)}`;
  for (const tool of tools) {
    const dump = JSON.stringify(tool);
    if (typeof tool !== 'object' || tool === null || !('type' in tool)) return `Missing tool type: ${dump}`;
    if (tool.type !== 'function') return `Unsupported tool type: ${dump}`;
    if (!('function' in tool)) return `Missing tool function: ${dump}`;
    if (typeof tool.function !== 'object' || tool.function === null || !('name' in tool.function))
      return "[json.exception.out_of_range.403] key 'name' not found";
  }
  return undefined;
}

/** llama-server's 500 for a chat body it parsed but cannot render (tools, images), or undefined. */
export function chatRefusal(body, o) {
  const tools = toolsProblem(body.tools);
  if (tools !== undefined)
    return `Failed to parse tools: ${tools}; tools = ${JSON.stringify(body.tools, null, 2)}`;
  for (const m of body.messages) {
    if (!Array.isArray(m?.content)) continue;
    for (const part of m.content)
      if (part?.type === 'image_url' && !o.vision)
        return 'image input is not supported - hint: if this is unexpected, you may need to provide the mmproj';
  }
  return undefined;
}
