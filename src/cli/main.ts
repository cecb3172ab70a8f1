import { Command, CommanderError } from 'commander';

import { Runner } from './command.js';
import { registerAudit } from './ctl/audit.js';
import { registerCache } from './ctl/cache.js';
import { registerConfig } from './ctl/config.js';
import { registerKeys } from './ctl/keys.js';
import { registerLogin } from './ctl/login.js';
import { registerModels } from './ctl/models.js';
import { registerNodes } from './ctl/nodes.js';
import { registerPlan } from './ctl/plan.js';
import { registerPull } from './ctl/pull.js';
import { registerReplicas } from './ctl/replicas.js';
import { registerUsage } from './ctl/usage.js';
import { registerAgent } from './agent-command.js';
import { registerDoctor } from './doctor-command.js';
import { registerFetch } from './fetch-command.js';
import { registerGateway } from './gateway-command.js';
import { registerServe } from './run-control-plane.js';
import { noteParent } from './signals.js';
import { version } from './version.js';

/** Builds the whole command line; every command is registered by its own module. */
export function buildProgram(run: Runner): Command {
  const program = new Command('llmgw')
    .description('llmgw: your own machines, with or without GPUs, as one OpenAI-compatible LLM service')
    .version(version, '-V, --version', 'print the version')
    .showHelpAfterError('(llmgw --help lists the commands)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });

  registerServe(program, run);
  registerAgent(program, run);
  registerDoctor(program, run);
  registerGateway(program, run);
  registerFetch(program, run);

  const ctl = program
    .command('ctl')
    .description('control a cluster through its API (like kubectl)')
    .option(
      '--server <url>',
      'the control plane (default: LLMGW_SERVER, the saved login, else http://127.0.0.1:8080)',
    )
    .option('--key <key>', 'the API key (default: LLMGW_KEY, else the saved login)')
    .option('--json', 'print JSON instead of tables')
    .exitOverride();
  registerLogin(ctl, run);
  registerModels(ctl, run);
  const model = ctl.commands.find((c) => c.name() === 'model');
  if (model !== undefined) registerPull(model, run);
  registerCache(ctl, run);
  registerKeys(ctl, run);
  registerAudit(ctl, run);
  registerConfig(ctl, run);
  registerNodes(ctl, run);
  registerPlan(ctl, run);
  registerReplicas(ctl, run);
  registerUsage(ctl, run);

  // kubectl takes its flags anywhere on the line: each ctl command takes them itself too.
  // `--key` is the API key on every one of them (a key's name is --key-name).
  program.enablePositionalOptions();
  ctl.enablePositionalOptions();
  for (const leaf of allCommands(ctl).filter(
    (c) => c !== ctl && (c.commands.length === 0 || c.name() === 'token'),
  )) {
    const has = (flag: string) => leaf.options.some((o) => o.long === flag);
    if (!has('--server')) leaf.option('--server <url>', 'the control plane');
    if (!has('--key')) leaf.option('--key <key>', 'the API key');
    if (!has('--json')) leaf.option('--json', 'print JSON instead of tables');
  }
  for (const cmd of allCommands(program)) cmd.exitOverride();
  return program;
}

function allCommands(c: Command): Command[] {
  return [c, ...c.commands.flatMap(allCommands)];
}

/** Runs the command line; resolves with the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  noteParent();
  const run = new Runner();
  const program = buildProgram(run);
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version are successes; everything else commander refuses is a usage error.
      if (
        e.code === 'commander.helpDisplayed' ||
        e.code === 'commander.version' ||
        e.code === 'commander.help'
      )
        return 0;
      if (e.code === 'commander.executeSubCommandAsync') return 1;
      return 2;
    }
    throw e;
  }
  return run.exitCode;
}
