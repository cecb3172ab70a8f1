import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/** The executable a command name runs: an absolute path if it is one and runs, else the first on PATH. */
export function which(command: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (isAbsolute(command) || command.includes('/')) return isExecutable(command) ? command : undefined;
  for (const dir of (env['PATH'] ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
