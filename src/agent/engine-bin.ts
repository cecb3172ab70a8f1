import type { Engine } from '../engines/types.js';
import { configuredBin, type EngineSettingsWire } from '../protocol/agent-protocol.js';

/**
 * The executable a shard runs: inside its image for a container; for an engine the agent
 * installs, the one it chose (llama-bin.ts says in which order); else this node's own
 * setting, else the control plane's (agent.engines.NAME.bin), else the engine's usual name.
 * Asked by engine, so a new engine needs no line here.
 */
export function engineBin(o: {
  engine: Pick<Engine, 'name' | 'installedByAgent' | 'defaultBin' | 'imageExecutable'>;
  container: boolean;
  /** The agent's choice for an engine it installs (undefined while none is chosen). */
  installed: string | undefined;
  /** This node's own settings, by engine. */
  local: Readonly<Record<string, string | undefined>>;
  /** The control plane's engine settings. */
  sent: EngineSettingsWire;
}): string {
  const { engine } = o;
  if (o.container) return engine.imageExecutable;
  if (engine.installedByAgent) return o.installed ?? engine.defaultBin;
  return o.local[engine.name] ?? configuredBin(o.sent, engine.name) ?? engine.defaultBin;
}
