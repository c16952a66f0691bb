/**
 * Shared by the conformance suites: finding the third-party peers their install-*.sh scripts
 * build (the CI/SKIPPED rule), self-signed certificates, and a gateway with an h2c and a TLS
 * listener in front of an echo upstream.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { toolsDir } from '../envoy/envoy.ts';

export { toolsDir };

/** A peer the suite needs: its path (env override, else where the install script puts it). */
export interface Tool {
  /** What the SKIPPED line and the CI error call it. */
  readonly name: string;
  /** An environment variable that overrides the path. */
  readonly env?: string;
  /** Where the install script links it, relative to the tools dir. */
  readonly installed: string;
  /** The install script, relative to the repository (for the message). */
  readonly script: string;
}

/** The path of `tool`, or undefined when it is not installed. */
export function findTool(tool: Tool): string | undefined {
  const fromEnv = tool.env ? process.env[tool.env] : undefined;
  const path = fromEnv || join(toolsDir(), tool.installed);
  return existsSync(path) ? path : undefined;
}

/** Whether `command` is on PATH (Debian tools such as openssl and curl). */
export function onPath(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A suite that needs third-party peers: `body` gets their paths. Without them the suite fails
 * under `CI=true` (one failing test that names what is missing) and is skipped, with a loud
 * SKIPPED line, elsewhere (the rule of test/kube/describe-with-kube.ts).
 */
export function describeWithTools(title: string, tools: readonly Tool[], body: (paths: Record<string, string>) => void): void {
  const paths: Record<string, string> = {};
  const missing: Tool[] = [];
  for (const tool of tools) {
    const path = findTool(tool);
    if (path) paths[tool.name] = path;
    else missing.push(tool);
  }
  if (missing.length) {
    const what = missing.map((t) => `${t.name} (bash ${t.script}${t.env ? ` or ${t.env}=<path>` : ''})`).join(', ');
    if (process.env.CI === 'true') {
      describe(title, () => {
        it('needs its conformance peers on CI', () => {
          throw new Error(`missing ${what}`);
        });
      });
      return;
    }
    console.warn(`\n*** SKIPPED: ${title}: missing ${what} ***\n`);
  }
  describe.skipIf(missing.length > 0)(title, () => body(paths));
}

/** A self-signed certificate (P-256 unless `rsa`) for `names`, made by the openssl CLI in `dir`. */
export async function selfSignedCert(dir: string, name: string, names: string[], options: { rsa?: boolean } = {}): Promise<{ cert: string; key: string; certFile: string; keyFile: string }> {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  const keyArgs = options.rsa ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'];
  execFileSync('openssl', ['req', '-x509', ...keyArgs, '-nodes', '-keyout', keyFile, '-out', certFile, '-subj', `/CN=${names[0]}`, '-days', '2', '-addext', `subjectAltName=${names.map((n) => (/^[\d.]+$/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',')}`], { stdio: 'ignore' });
  return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8'), certFile, keyFile };
}

/** A VirtualService for every host (`*`) to `upstream`, over TLS when `sslConfig` is given. */
export function catchAllVirtualService(name: string, upstream: string, sslConfig?: object): object {
  return {
    apiVersion: 'gateway.solo.io/v1',
    kind: 'VirtualService',
    metadata: { name },
    spec: { ...(sslConfig ? { sslConfig } : {}), virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: upstream } } } }] } },
  };
}

/** A static Upstream to 127.0.0.1:`port`. */
export function staticUpstream(name: string, port: number, extra: object = {}): object {
  return { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] }, ...extra } };
}

/** Set difference `a \ b`, sorted. */
export function minus(a: Iterable<string>, b: Iterable<string>): string[] {
  const drop = new Set(b);
  return [...new Set(a)].filter((x) => !drop.has(x)).sort();
}
