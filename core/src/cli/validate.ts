import { ConfigCodes, formatDiagnostic, type Diagnostic } from '../config/diagnostic.ts';
import type { ManifestDocument } from '../config/manifest.ts';
import { readManifests } from '../config/source/directory.ts';
import { ConfigStore } from '../config/store.ts';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { kindsOf } from '../config/resource-checks.ts';
import { resourceChecks } from '../resource-checks.ts';
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
  const read = expandLists(await readManifests(positionals));
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

/**
 * `kubectl get vs,us -o yaml` prints one `kind: List` whose `items` are the resources (issue 27
 * item 9): each item is validated as if it were a document of its own, its lines those of the
 * List's `items[i]`. A List's items are not Lists again (kubectl never nests them).
 */
export function expandLists(read: { documents: ManifestDocument[]; diagnostics: Diagnostic[] }): { documents: ManifestDocument[]; diagnostics: Diagnostic[] } {
  const documents: ManifestDocument[] = [];
  const diagnostics = [...read.diagnostics];
  for (const doc of read.documents) {
    const value = doc.value as { apiVersion?: unknown; kind?: unknown; items?: unknown } | null;
    // `List` (kubectl) and `<Kind>List` (the API server's list responses) under any apiVersion.
    const isList = typeof value === 'object' && value !== null && !Array.isArray(value) && typeof value.kind === 'string' && /^[A-Za-z]*List$/.test(value.kind) && 'items' in value;
    if (!isList) {
      documents.push(doc);
      continue;
    }
    if (!Array.isArray(value.items)) {
      diagnostics.push({ code: ConfigCodes.PARSE, severity: 'error', file: doc.file, line: doc.lineOf(['items']), message: `${value.kind as string}: items must be a list of resources` });
      continue;
    }
    value.items.forEach((item, i) => {
      documents.push({
        file: doc.file,
        // Unique within the file: the List's position, then the item's.
        index: doc.index + (i + 1) / (value.items as unknown[]).length / 2,
        line: doc.lineOf(['items', i]),
        value: item,
        lineOf: (path) => doc.lineOf(['items', i, ...path]),
      });
    });
  }
  return { documents, diagnostics };
}
