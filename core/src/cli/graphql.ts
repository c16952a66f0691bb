import { readFile, writeFile } from 'node:fs/promises';
import { parse, stringify } from 'yaml';
import { ErrorCodes, GatehouseError } from '../errors.ts';
import { describeFlags, parseFlags, type FlagDef } from './flags.ts';

const FLAGS: readonly FlagDef[] = [
  { name: 'openapi', type: 'string', description: 'an OpenAPI 3 document (YAML or JSON): a file, or an http(s) URL' },
  { name: 'grpc', type: 'string', description: 'HOST:PORT of a gRPC server with server reflection (plaintext)' },
  { name: 'name', type: 'string', description: 'the GraphQLApi name (default: from the document title or the first service)' },
  { name: 'namespace', type: 'string', description: 'namespace of the written resources (default: none, i.e. default)' },
  { name: 'upstream', type: 'string', description: 'the Upstream name (default: NAME-upstream)' },
  { name: 'upstream-address', type: 'string', description: 'HOST:PORT of the REST server (default: from the document\'s servers[0].url)' },
  { name: 'out', type: 'string', description: 'write the manifests to this file (default: stdout)' },
  { name: 'help', type: 'boolean', description: 'show this help' },
];

const USAGE = 'usage: gatehouse graphql discover (--openapi FILE|URL | --grpc HOST:PORT) [flags]';

/** Largest OpenAPI document read. */
const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/**
 * `gatehouse graphql discover`: writes an Upstream and a GraphQLApi (SDL with `@resolve`, REST or
 * gRPC resolutions) from an OpenAPI 3 document or from gRPC server reflection (issue 25 item 13).
 * `gatehouse validate` accepts the output unchanged. What could not be mapped goes to stderr.
 */
export async function runGraphQL(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const { values } = parseFlags(rest, FLAGS);
  if (sub !== 'discover' || values.help) {
    process.stdout.write(`${USAGE}\n\n${describeFlags(FLAGS)}\n`);
    return sub === 'discover' || sub === '--help' ? 0 : 2;
  }
  const openapi = values.openapi as string | undefined;
  const grpcAddress = values.grpc as string | undefined;
  if ((openapi === undefined) === (grpcAddress === undefined)) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, 'give exactly one of --openapi or --grpc');
  const common = { name: values.name as string | undefined, namespace: values.namespace as string | undefined, upstream: values.upstream as string | undefined };
  let discovered;
  try {
    if (openapi !== undefined) {
      const { discoverOpenApi } = await import('../graphql/discovery/openapi.ts');
      const address = values['upstream-address'] !== undefined ? hostPort(values['upstream-address'] as string, '--upstream-address') : undefined;
      discovered = discoverOpenApi(await readDocument(openapi), { ...common, address });
    } else {
      const { discoverGrpc } = await import('../graphql/discovery/grpc.ts');
      discovered = await discoverGrpc(hostPort(grpcAddress!, '--grpc'), common);
    }
  } catch (error) {
    if (error instanceof GatehouseError) throw error;
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `${openapi !== undefined ? `--openapi ${openapi}` : `--grpc ${grpcAddress}`}: ${(error as Error).message}`);
  }
  const text = discovered.documents.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
  if (values.out) await writeFile(values.out as string, text);
  else process.stdout.write(text);
  for (const note of discovered.notes) process.stderr.write(`note: ${note}\n`);
  return 0;
}

async function readDocument(source: string): Promise<unknown> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    const response = await fetch(source, { redirect: 'follow', signal: AbortSignal.timeout(30_000) });
    if (!response.ok) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--openapi ${source}: HTTP ${response.status}`);
    const body = Buffer.from(await response.arrayBuffer());
    if (body.length > MAX_DOCUMENT_BYTES) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--openapi ${source}: larger than ${MAX_DOCUMENT_BYTES} bytes`);
    text = body.toString('utf8');
  } else {
    text = await readFile(source, 'utf8').catch((error: Error) => {
      throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--openapi ${source}: ${error.message}`);
    });
  }
  try {
    // YAML is a superset of JSON: one parser for both.
    return parse(text, { maxAliasCount: 100 });
  } catch (error) {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--openapi ${source}: not YAML or JSON (${(error as Error).message})`);
  }
}

function hostPort(value: string, flag: string): { host: string; port: number } {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[2]) : NaN;
  if (!match || !(port > 0 && port < 65536)) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `${flag} must be HOST:PORT, got "${value}"`);
  return { host: match[1]!, port };
}
