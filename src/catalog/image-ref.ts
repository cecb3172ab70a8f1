/**
 * Container image references (`registry.example.com:5000/team/vllm:v1@sha256:…`), read as
 * the Docker distribution grammar reads them, for the catalog's `image:` and the agent's
 * `agent.containers` settings: every refusal says what to write instead.
 */

/** An image reference, parsed as the Docker distribution grammar reads it. */
export interface ImageRef {
  /** `ghcr.io`, `registry.local:5000`; undefined for Docker Hub written without one. */
  registry?: string;
  /** `vllm/vllm-openai`. */
  path: string;
  tag?: string;
  digest?: string;
}

const hostPart = '(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)';
const registryPattern = new RegExp(`^(?:${hostPart}(?:\\.${hostPart})*|\\[[0-9A-Fa-f:]+\\])(?::\\d{1,5})?$`);
const componentPattern = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const tagPattern = /^[\w][\w.-]{0,127}$/;
const digestPattern = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Za-z0-9=_-]{32,}$/;
const example = 'e.g. vllm/vllm-openai:v0.21.0 or registry.example.com:5000/team/vllm:v1';

/** Parses an image reference, or says in words what is wrong with it and what to write. */
export function parseImage(text: string): ImageRef | { problem: string } {
  const bad = (why: string) => ({ problem: `"${text}" is not an image reference: ${why}` });
  if (text === '') return { problem: `an image reference is empty: name one, ${example}` };
  if (/\s/.test(text)) return bad('it has white space in it');
  const scheme = /^[a-z]+:\/\//i.exec(text);
  if (scheme !== null) return bad(`write it without ${scheme[0]}: "${text.slice(scheme[0].length)}"`);
  let rest = text;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (
      !digestPattern.test(digest) ||
      (digest.startsWith('sha256:') && !/^sha256:[0-9a-f]{64}$/.test(digest))
    )
      return bad(`its digest "${digest}" is not ALGORITHM:HEX, e.g. @sha256: and 64 hex digits`);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!tagPattern.test(tag))
      return bad(`its tag "${tag}" may hold letters, digits, _ . and - (not first), at most 128 characters`);
  }
  const parts = rest.split('/');
  const first = parts[0] ?? '';
  let registry: string | undefined;
  if (parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost')) {
    registry = first;
    parts.shift();
    if (!registryPattern.test(registry))
      return bad(`its registry "${registry}" is not HOST or HOST:PORT, e.g. registry.example.com:5000`);
  }
  for (const part of parts) {
    if (componentPattern.test(part)) continue;
    if (part === '') return bad(`its name "${rest}" has an empty part between slashes`);
    if (componentPattern.test(part.toLowerCase()))
      return bad(`names are lower case: write "${text.replace(part, part.toLowerCase())}"`);
    return bad(
      `"${part}" is not a name part (lower-case letters and digits, joined by . _ __ or -), ${example}`,
    );
  }
  const path = parts.join('/');
  return {
    ...(registry === undefined ? {} : { registry }),
    path,
    ...(tag === undefined ? {} : { tag }),
    ...(digest === undefined ? {} : { digest }),
  };
}

/** What is wrong with an image reference, or undefined when it is one. */
export function imageProblem(text: string): string | undefined {
  const r = parseImage(text);
  return 'problem' in r ? r.problem : undefined;
}

/**
 * What is wrong with a registry mirror setting: HOST[:PORT], with a path prefix where the
 * mirror keeps each upstream under one (a Harbor proxy cache project: harbor.local/hub).
 */
export function registryProblem(text: string): string | undefined {
  const scheme = /^[a-z]+:\/\//i.exec(text);
  if (scheme !== null)
    return `write the registry without ${scheme[0]}: "${text.slice(scheme[0].length).replace(/\/+$/, '')}"`;
  const [host = '', ...prefix] = text.replace(/\/+$/, '').split('/');
  if (!registryPattern.test(host))
    return `"${text}" is not a registry: write HOST or HOST:PORT, e.g. registry.example.com:5000 (with a path prefix where the mirror has one: harbor.example.com/dockerhub)`;
  const badPart = prefix.find((p) => !componentPattern.test(p));
  if (badPart !== undefined)
    return `"${badPart}" in "${text}" is not a path part of a registry (lower-case letters and digits, joined by . _ __ or -)`;
  return undefined;
}
