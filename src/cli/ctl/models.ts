import { readFileSync } from 'node:fs';

import type { Command } from 'commander';

import { ApiError } from '../../client/api-client.js';
import { parseYamlText, yamlValue } from '../../config/yaml-error.js';
import { messageOf } from '../../core/errors.js';
import {
  isModelView,
  type ModelChange,
  type ModelManifests,
  type ModelUseView,
  type ModelView,
} from '../../protocol/model-views.js';
import { stringOpt, type Runner } from '../command.js';
import { age, emit, type Output, table, yaml } from '../output.js';
import { UsageError } from '../usage-error.js';

import { purgeText } from './cache.js';
import { connect } from './connection.js';
import { registerModelAutoscale } from './model-autoscale.js';
import { registerModelContext } from './model-context.js';
import { modelDetail, profilesSummary } from './model-detail.js';
import { useDetail, useTable } from './model-use-text.js';
import { registerModelGpus } from './model-gpus.js';
import { dryRunText, objectsFormat, printObjects } from './model-manifests.js';

export function registerModels(ctl: Command, run: Runner): void {
  ctl
    .command('models')
    .description('list the models of the catalog')
    .action(
      run.action(async ({ o, conn }) => {
        const models = await connect(conn).listModels();
        const full = models.filter(isModelView);
        emit(o, { items: models }, ({ items }) =>
          items.length === 0
            ? 'No models yet: declare them in the settings (llmgw ctl config edit) or add one with llmgw ctl model add -f FILE.'
            : full.length < items.length
              ? useTable(items.filter((m): m is ModelUseView => !isModelView(m)))
              : table(
                  ['NAME', 'ORIGIN', 'REPLICAS', 'PROFILES', 'SOURCE', 'AGE'],
                  full.map((m) => [
                    m.name,
                    m.metadata.origin,
                    replicasText(m),
                    profilesSummary(m),
                    m.source,
                    age(m.metadata.created_at),
                  ]),
                ),
        );
      }),
    );

  const model = ctl.command('model').description('show, add or remove one model');

  model
    .command('manifests')
    .argument('<name>', 'the model')
    .option('-o, --output <format>', 'yaml (default) or json')
    .description(
      "the Kubernetes objects llmgw writes for a model now (its Deployment or LeaderWorkerSet), for review or for Git; its Secrets are llmgw's own and not printed",
    )
    .action(
      run.action(async ({ opts, o, conn }, name: string) => {
        const format = objectsFormat(opts) ?? 'yaml';
        const answer = await connect(conn).request<ModelManifests>(
          'GET',
          `/models/${encodeURIComponent(name)}/manifests`,
        );
        if (o.json) emit(o, answer.body, () => '');
        else printObjects(o, answer.body, format);
      }),
    );

  model
    .command('show')
    .argument('<name>', 'the model')
    .description(
      'what a model is: its source, revision and commit, files and sizes, and its shape (layers, heads, context, KV bytes per token)',
    )
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const client = connect(conn);
        const m = await client.getModel(name);
        // What runs of it now: replicas (downloading ones with their progress) and the nodes' downloads
        // (an admin's), and whether its profiles fit the cluster, as llmgw ctl plan says (or why that cannot be told).
        const [replicas, downloads, plan] = await Promise.all([
          client.listReplicas(name),
          !isModelView(m) || m.status.origin === undefined
            ? undefined
            : client.modelDownloads(name).then((d) => d.nodes),
          client.plan({ model: name }).catch((e: unknown) => ({ error: messageOf(e) })),
        ]);
        const live = { replicas, plan, ...(downloads === undefined ? {} : { downloads }) };
        emit(o, { ...m, ...live }, () => (isModelView(m) ? modelDetail(m, live) : useDetail(m, live)));
      }),
    );

  model
    .command('get')
    .argument('<name>', 'the model')
    .description(
      "print a model's definition as YAML (edit it and give it back to llmgw ctl model apply -f -)",
    )
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const m = await connect(conn).getModel(name);
        emit(o, m, (v) => {
          if (!isModelView(v)) return yaml(v);
          const { status: _status, ...definition } = v;
          return yaml(definition);
        });
      }),
    );

  model
    .command('resolve')
    .argument('<name>', 'the model')
    .description(
      "resolve a model's source again: pin it to the commit its revision points at now, and read its shape again",
    )
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const m = await connect(conn).resolveModel(name);
        emit(o, m, resolvedText);
      }),
    );

  model
    .command('add')
    .description(
      'add a model from a YAML or JSON file: the same shape as one entry of models: in the settings',
    )
    .requiredOption('-f, --file <file>', 'the model definition; - reads standard input')
    .option('--dry-run', 'check it as an add would, store nothing, and say what would be written')
    .option(
      '-o, --output <format>',
      'with --dry-run: print the Kubernetes objects llmgw would write (yaml or json)',
    )
    .action(
      run.action(async ({ opts, o, conn }) => {
        const spec = readDefinition(stringOpt(opts, 'file') ?? '-');
        const format = objectsFormat(opts);
        if (opts['dryRun'] === true) {
          const answer = await connect(conn).request<ModelManifests>('POST', '/models?dry_run=true', {
            json: spec,
          });
          if (format === undefined) emit(o, answer.body, dryRunText);
          else printObjects(o, answer.body, format);
          return;
        }
        if (format !== undefined) throw new UsageError('-o prints what --dry-run would write: add --dry-run');
        const m = await connect(conn).addModel(spec);
        warnings(o, m);
        emit(
          o,
          m,
          (v) =>
            `model "${v.name}" added (${v.replicas} replica${v.replicas === 1 ? '' : 's'}, profiles: ${profilesSummary(v)})`,
        );
      }),
    );

  model
    .command('apply')
    .description('add a model, or replace the one of the same name, from a YAML or JSON file')
    .requiredOption('-f, --file <file>', 'the model definition; - reads standard input')
    .action(
      run.action(async ({ opts, o, conn }) => {
        const spec = readDefinition(stringOpt(opts, 'file') ?? '-');
        const name = (spec as { name?: unknown } | null)?.name;
        if (typeof name !== 'string') throw new UsageError('the definition has no name: write name: MODEL');
        const client = connect(conn);
        let m: ModelChange;
        let verb = 'replaced';
        try {
          m = await client.replaceModel(name, spec);
        } catch (e) {
          if (!(e instanceof ApiError) || e.code !== 'not_found') throw e;
          m = await client.addModel(spec);
          verb = 'added';
        }
        warnings(o, m);
        emit(o, m, (v) => `model "${v.name}" ${verb} (version ${v.metadata.version ?? '-'})`);
      }),
    );

  model
    .command('scale')
    .argument('<name>', 'the model')
    .argument('<replicas>', 'how many replicas it runs (0 stops them all)')
    .description('set how many replicas a model runs')
    .action(
      run.action(async ({ o, conn }, name: string, count: string) => {
        const n = Number(count);
        if (!Number.isInteger(n) || n < 0)
          throw new UsageError(`replicas is a whole number of 0 or more, not "${count}"`);
        const m = await connect(conn).scaleModel(name, n);
        emit(o, m, (v) => `model "${v.name}" scaled to ${v.replicas} replica${v.replicas === 1 ? '' : 's'}`);
      }),
    );

  registerModelGpus(model, run);
  registerModelAutoscale(model, run);

  model
    .command('rm')
    .aliases(['remove', 'delete'])
    .argument('<name>', 'the model')
    .description('remove a model added through the API')
    .option('--purge', "also remove its files from every node's cache and the mirror")
    .action(
      run.action(async ({ opts, o, conn }, name: string) => {
        const m = await connect(conn).removeModel(name, { purge: opts['purge'] === true });
        emit(
          o,
          m,
          (v) => `model "${v.name}" removed${v.purge === undefined ? '' : `\n${purgeText(v.purge)}`}`,
        );
      }),
    );

  registerModelContext(model, run);
}

/** What the control plane warned of (a model that fits no class of the cluster), on stderr; --json has them too. */
function warnings(o: Output, m: ModelChange): void {
  for (const w of m.warnings ?? []) o.err(`warning: ${w}`);
}

function resolvedText(m: ModelView): string {
  const o = m.status.origin;
  const at =
    o === undefined
      ? ''
      : o.commit !== undefined
        ? ` at commit ${o.commit} (${o.revision})`
        : o.kind === 'url' && o.revision !== ''
          ? ` (ETag ${o.revision})`
          : '';
  const first = `model "${m.name}" resolved: ${m.source}${at}`;
  return m.status.problem === undefined ? first : `${first}\nproblem: ${m.status.problem}`;
}

/** `2`, or for an autoscaled model the count it runs now and its bounds: `2 (0-4)`. */
function replicasText(m: ModelView): string {
  if (m.autoscale === undefined) return String(m.replicas);
  return `${m.status.scale?.replicas ?? m.replicas} (${m.autoscale.min}-${m.autoscale.max})`;
}

/** A model definition from a file or standard input, YAML or JSON (JSON is YAML). */
export function readDefinition(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file === '-' ? 'standard input' : file}: ${messageOf(e)}`);
  }
  const { doc, errors } = parseYamlText(text);
  const first = errors[0];
  if (first !== undefined) {
    const frame = first.frame
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n');
    throw new UsageError(
      first.bound === true
        ? `${file}: line ${first.line}: ${first.message}\n${frame}`
        : `${file} is not valid YAML or JSON: line ${first.line}, column ${first.column}: ${first.message}\n${frame}`,
    );
  }
  const value: unknown = yamlValue(doc);
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && 'models' in value) {
    throw new UsageError(
      `${file} looks like a settings file (it has models:): give one model, the contents of one entry of models:`,
    );
  }
  if (Array.isArray(value)) throw new UsageError(`${file} holds a list: give one model per file`);
  return value;
}
