import { mkdir, mkdtemp, rm, writeFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { stringify } from 'yaml';

/** A temporary config directory. */
export interface ConfigDir {
  readonly path: string;
  /** Writes `name` (a relative path) atomically (temp file + rename), as a deployment tool would; objects become YAML documents. */
  write(name: string, content: string | object | object[]): Promise<void>;
  remove(name: string): Promise<void>;
  cleanup(): Promise<void>;
}

export async function makeConfigDir(files: Record<string, string | object | object[]> = {}): Promise<ConfigDir> {
  const path = await mkdtemp(join(tmpdir(), 'gatehouse-config-'));
  const dir: ConfigDir = {
    path,
    async write(name, content) {
      const text = typeof content === 'string' ? content : (Array.isArray(content) ? content : [content]).map((d) => stringify(d)).join('---\n');
      // `name` may hold subdirectories; the temp file sits beside the target (a hidden name, never read as config).
      const target = join(path, name);
      await mkdir(dirname(target), { recursive: true });
      const tmp = join(dirname(target), `.${basename(target)}.tmp`);
      await writeFile(tmp, text);
      await rename(tmp, target);
    },
    async remove(name) {
      await rm(join(path, name), { force: true });
    },
    async cleanup() {
      await rm(path, { recursive: true, force: true });
    },
  };
  for (const [name, content] of Object.entries(files)) await dir.write(name, content);
  return dir;
}

/** Manifest builders for tests (our default API group domain). */
export const manifests = {
  upstream(name: string, hosts: { addr: string; port: number }[], extra: object = {}) {
    return { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts }, ...extra } };
  },
  virtualService(name: string, virtualHost: object) {
    return { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name }, spec: { virtualHost } };
  },
  authConfig(name: string, configs: object[]) {
    return { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name }, spec: { configs } };
  },
  graphqlApi(name: string, executableSchema: object) {
    return { apiVersion: 'graphql.gatehouse.dev/v1beta1', kind: 'GraphQLApi', metadata: { name }, spec: { executableSchema } };
  },
};

/**
 * The config the plugin-image tests serve once gatehouse-init has installed RequiredHeader:
 * host `app.test` → the echo upstream, behind RequiredHeader (`x-team: blue|green`).
 */
export function requiredHeaderAppFiles(echoPort: number): Record<string, object> {
  return {
    'upstream.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echoPort }]),
    'auth.yaml': manifests.authConfig('required-header', [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-team', AllowedValues: ['blue', 'green'] } } }]),
    'vs.yaml': manifests.virtualService('app', {
      domains: ['app.test'],
      options: { extauth: { configRef: { name: 'required-header' } } },
      routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }],
    }),
  };
}
