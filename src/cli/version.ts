import { createRequire } from 'node:module';

/** The package's version, from its package.json (two folders up from src/cli and dist/cli alike). */
export const version: string = (createRequire(import.meta.url)('../../package.json') as { version: string })
  .version;
