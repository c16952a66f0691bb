import { formatDiagnostic } from '../config/diagnostic.ts';
import { readManifests } from '../config/source/directory.ts';
import { ConfigStore } from '../config/store.ts';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { kindsOf, resourceChecks } from '../config/resource-checks.ts';
import { describeFlags, parseFlags, type FlagDef } from './flags.ts';
import { SECRET_FLAGS, crossNamespaceSecretsValue } from './gateway-flags.ts';

const FLAGS: readonly FlagDef[] = [
  { name: 'api-group-domain', type: 'string', default: DEFAULT_API_GROUP_DOMAIN, description: 'domain of the API groups' },
  ...SECRET_FLAGS,
  { name: 'help', type: 'boolean', description: 'show this help' },
];

/**
 * `gatehouse validate PATH...`: the verdicts the gateway would reach, offline (SPEC 2.4).
 * Exit 0 when everything is accepted, 1 when anything is rejected.
 */
export async function runValidate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, FLAGS);
  if (values.help || positionals.length === 0) {
    process.stdout.write(`usage: gatehouse validate PATH... (files or directories)\n\n${describeFlags(FLAGS)}\n`);
    return values.help ? 0 : 2;
  }
  const read = await readManifests(positionals);
  const store = new ConfigStore({ apiGroupDomain: values['api-group-domain'] as string, crossNamespaceSecrets: crossNamespaceSecretsValue(values), checks: await resourceChecks(kindsOf(read.documents)) });
  const snapshot = store.load(read.documents, read.diagnostics);
  const lines: string[] = [];
  for (const d of snapshot.diagnostics) lines.push(formatDiagnostic(d));
  for (const s of snapshot.statuses) {
    lines.push(`${s.state.padEnd(8)} ${s.kind} ${s.namespace}/${s.name}${s.file ? ` (${s.file}:${s.line})` : ''}`);
  }
  const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected').length;
  const warnings = snapshot.statuses.filter((s) => s.state === 'Warning').length;
  const fileErrors = snapshot.diagnostics.filter((d) => d.severity === 'error' && !d.resource).length;
  lines.push(`${snapshot.statuses.length} resources: ${snapshot.statuses.length - rejected - warnings} accepted, ${warnings} with warnings, ${rejected} rejected${fileErrors ? `; ${fileErrors} file errors` : ''}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  return rejected > 0 || snapshot.diagnostics.some((d) => d.severity === 'error') ? 1 : 0;
}
