import type { Command } from 'commander';

import { stringOpt, type Runner } from './command.js';
import { UsageError } from './usage-error.js';

/**
 * `llmgw fetch`: a model's files into a cache root (the Hugging Face layout), with the agent's
 * downloader and no control plane: the init container of Kubernetes pods runs it
 * (src/kube/manifests.ts), and anyone may, to fill a models volume by hand.
 */
export function registerFetch(program: Command, run: Runner): void {
  program
    .command('fetch')
    .description(
      "download a model's files into a cache directory (the Hugging Face cache layout engines read), without a control plane",
    )
    .argument('<source>', 'hf://ORG/REPO[/FILE][@REVISION], or an http(s) URL')
    .requiredOption('--into <dir>', 'the cache root (HF_HUB_CACHE of the engines), e.g. /models')
    .option(
      '--revision <rev>',
      "a branch, tag or commit of the repository (instead of the source's @REVISION)",
    )
    .option(
      '--origin <json>',
      'the pinned origin the control plane resolved (its files, commit and digests, as JSON): fetch exactly it, without asking the hub what the source is',
    )
    .option(
      '--endpoint <url>',
      'the Hugging Face hub or a mirror of it (default: HF_ENDPOINT, else huggingface.co)',
    )
    .option('--json', 'print one JSON line when done (progress stays on stderr)')
    .action(
      run.action(async ({ opts, o }, source) => {
        const into = stringOpt(opts, 'into') ?? '';
        if (into === '')
          throw new UsageError('--into names the cache directory: llmgw fetch SOURCE --into DIR');
        const { runFetch } = await import('./run-fetch.js');
        await runFetch({
          o,
          source,
          into,
          revision: stringOpt(opts, 'revision'),
          origin: stringOpt(opts, 'origin'),
          endpoint: stringOpt(opts, 'endpoint'),
        });
      }),
    );
}
