/**
 * Reference plugins end to end: built with the real compiler and served by real gatehouse
 * processes in both deployment shapes, `gatehouse run` (auth embedded) and `gatehouse gateway`
 * + `gatehouse extauth` (the Kubernetes shape: checks over gRPC).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';

/** The two shapes every reference plugin must work in. */
export const SHAPES = ['run', 'gateway + extauth'] as const;
export type Shape = (typeof SHAPES)[number];

/** A running gateway in one {@link Shape}. */
export interface Deployment {
  /** The gateway's traffic URL. */
  readonly url: string;
  /** Every process started (the gateway last). */
  readonly processes: GatehouseProcess[];
  /** The process running the auth steps (the `run` process, or `extauth`). */
  readonly auth: GatehouseProcess;
  /** Every JSON log line and all stderr of every process, as text (for "never logged" checks). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `shape` on `configDir` with `pluginDir` and waits until the auth side has built its
 * AuthConfigs (plugin Start included). The gateway gets a generous auth deadline so a loaded
 * machine cannot turn a slow check into a 403.
 */
export async function deploy(shape: Shape, configDir: string, pluginDir: string, options: { env?: NodeJS.ProcessEnv; args?: string[]; /** extra arguments of the auth process only (`run` or `extauth`) */ authArgs?: string[] } = {}): Promise<Deployment> {
  const processes: GatehouseProcess[] = [];
  const common = ['--config-dir', configDir, '--extauth-timeout', '3s', ...(options.args ?? [])];
  const env = options.env ?? {};
  try {
    let auth: GatehouseProcess;
    if (shape === 'run') {
      auth = await startGatehouse('run', [...common, '--plugin-dir', pluginDir, ...(options.authArgs ?? [])], { env });
      processes.push(auth);
    } else {
      auth = await startGatehouse('extauth', ['--config-dir', configDir, '--plugin-dir', pluginDir, '--host', '127.0.0.1', ...(options.authArgs ?? [])], { env });
      processes.push(auth);
      processes.push(await startGatehouse('gateway', [...common, '--extauth-address', `127.0.0.1:${auth.port}`], { env }));
    }
    await auth.waitForLog((line) => line.msg === 'received new auth configuration', 20_000);
    const gateway = processes.at(-1)!;
    return {
      url: gateway.url,
      processes,
      auth,
      output: () => processes.map((p) => `${p.logs.map((l) => JSON.stringify(l)).join('\n')}\n${p.stderr()}`).join('\n'),
      async stop() {
        for (const p of [...processes].reverse()) await p.stop();
      },
    };
  } catch (error) {
    for (const p of processes.reverse()) await p.stop();
    throw error;
  }
}

/** Builds `plugins/<folder>/src/index.ts` as `name` into a fresh directory, as `gatehouse-plugin build` does. */
export async function buildReferencePlugin(folder: string, name: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `gatehouse-${folder}-`));
  await buildPlugin({ entry: fileURLToPath(new URL(`../../plugins/${folder}/src/index.ts`, import.meta.url)), name, outDir: dir });
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** A route on `prefix` to Upstream `upstream`, behind AuthConfig `authConfig`, with extra route options. */
export function authRoute(prefix: string, authConfig: string, upstream = 'up', extauth: object = {}) {
  return { matchers: [{ prefix }], options: { extauth: { configRef: { name: authConfig }, ...extauth } }, routeAction: { single: { upstream: { name: upstream } } } };
}

/** GET `url` with `headers`: the status, headers and body text. */
export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(url, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}
