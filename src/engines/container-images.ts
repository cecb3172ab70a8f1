import { parseImage } from '../catalog/image-ref.js';
import type { EngineName } from '../catalog/model-spec.js';

import { engineFor } from './registry.js';

/**
 * The engines' official images, for profiles with `runtime: container`: which image and
 * tag runs when neither the profile (`image:`) nor the node's settings
 * (`agent.containers.images`) name one (each engine's `defaultImage`, where the tag it pins
 * says where it was read), and the registry mirror an offline site puts in front of them.
 * Pure: table-tested in container-images.test.ts.
 */

/**
 * The engine's default image (its own `defaultImage`: llama.cpp's CUDA build for a GPU profile,
 * its CPU build otherwise), and the executable inside it.
 */
export function defaultImage(engine: EngineName, o: { gpu: boolean; llamaBuild: string }): string {
  return engineFor(engine).defaultImage(o);
}

export function imageExecutable(engine: EngineName): string {
  return engineFor(engine).imageExecutable;
}

/**
 * The image a container profile runs: the profile's own, else the node's setting for the
 * engine, else the default image, moved to the mirror `registry` when one is set (images
 * named by hand are taken as written: their author chose the registry).
 */
export function chooseImage(o: {
  engine: EngineName;
  profileImage?: string | undefined;
  settingsImage?: string | undefined;
  gpu: boolean;
  llamaBuild: string;
  registry?: string | undefined;
}): string {
  if (o.profileImage !== undefined) return o.profileImage;
  if (o.settingsImage !== undefined && o.settingsImage !== '') return o.settingsImage;
  const image = defaultImage(o.engine, o);
  return o.registry === undefined || o.registry === '' ? image : onRegistry(image, o.registry);
}

/**
 * The same image on the mirror `registry`: its registry replaced, or put in front of a
 * Docker Hub image (whose official images are under library/, as mirrors keep them).
 */
export function onRegistry(image: string, registry: string): string {
  const ref = parseImage(image);
  if ('problem' in ref) throw new Error(ref.problem);
  const hub = ref.registry === undefined || ref.registry === 'docker.io';
  const path = hub && !ref.path.includes('/') ? `library/${ref.path}` : ref.path;
  return `${registry.replace(/\/+$/, '')}/${path}${ref.tag === undefined ? '' : `:${ref.tag}`}${ref.digest === undefined ? '' : `@${ref.digest}`}`;
}
