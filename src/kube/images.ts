import type { EngineName } from '../catalog/model-spec.js';
import { defaultLlamaBuild } from '../config/schema.js';
import { chooseImage, imageExecutable } from '../engines/container-images.js';

/**
 * The image a profile's pods run, and the engine's executable in it: the same table as the
 * agent's container launcher (src/engines/container-images.ts), so a profile runs the same
 * image on a node's Docker as in a pod. The profile's own `image:` wins.
 */
export function podImage(engine: EngineName, gpu: boolean, profileImage?: string): string {
  return chooseImage({ engine, profileImage, gpu, llamaBuild: defaultLlamaBuild });
}

export function podExecutable(engine: EngineName): string {
  return imageExecutable(engine);
}
