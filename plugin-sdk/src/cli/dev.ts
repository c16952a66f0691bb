import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '../build/build-plugin.ts';
import { CodedError } from '../errors.ts';

/**
 * `gatehouse-plugin dev` (SPEC 5.3, issue 30 item 7): a local gateway for the plugin project in
 * the current directory, like `wrangler dev`. It builds the plugin, starts an echo upstream
 * (answers with what it received, as JSON), writes a config of one VirtualService routing every
 * path to it behind an AuthConfig with the plugin, runs `gatehouse run` on them, and rebuilds the
 * plugin when a file under the entry's folder changes (the gateway reloads the step on its own).
 */
export interface DevOptions {
  /** The plugin project (default: the current directory). */
  dir: string;
  /** The plugin's entry (default `src/index.ts`). */
  entry?: string;
  /** The plugin's name (default: `--name` of the project's build script, or the folder's name). */
  name?: string;
  /** The step's `config` (JSON). */
  config?: Record<string, unknown>;
  /** The gateway's port (default 8080; 0 picks one). */
  port?: number;
  /** Where lines go. */
  out: (line: string) => void;
  err: (line: string) => void;
}

export const DevCodes = {
  /** The project or its entry cannot be found, or the config is not a JSON object. */
  BAD_PROJECT: 'GH_PLUGIN_DEV_PROJECT',
  /** No `gatehouse` command to run: neither the project's `@gatehouse/core` nor this SDK's. */
  NO_GATEWAY: 'GH_PLUGIN_DEV_NO_GATEWAY',
} as const;

/** A running dev loop. */
export interface DevSession {
  /** The gateway's URL once it listens. */
  readonly url: Promise<string>;
  /** Resolves when the gateway exits. */
  readonly exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** The `gatehouse` launcher: the project's `@gatehouse/core`, else the one beside this SDK. */
function gatehouseBin(projectDir: string): string {
  // Node's own lookup (node_modules of each folder upward), without resolving the package's
  // exports: only its `bin/gatehouse.js` is wanted.
  for (const start of [projectDir, dirname(fileURLToPath(import.meta.url))]) {
    for (let folder = start; ; folder = dirname(folder)) {
      const bin = join(folder, 'node_modules/@gatehouse/core/bin/gatehouse.js');
      if (existsSync(bin)) return bin;
      if (folder === dirname(folder)) break;
    }
  }
  throw new CodedError(DevCodes.NO_GATEWAY, 'gatehouse-plugin dev needs @gatehouse/core (the gateway) with its gatehouse command: add it to the project\'s devDependencies (gatehouse-plugin init does) and npm install');
}

/** The plugin's name from the project's build script (`gatehouse-plugin build … --name X`). */
async function nameOf(dir: string): Promise<string> {
  try {
    const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    const match = /--name\s+([A-Za-z_$][\w$]*)/.exec(pkg.scripts?.build ?? '');
    if (match) return match[1]!;
  } catch {
    // No package.json: the folder's name.
  }
  return basename(dir).replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase()).replace(/^./, (c) => c.toUpperCase());
}

/** An upstream that answers every request with what it received. */
async function startEcho(): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      res.setHeader('content-type', 'application/json');
      res.end(`${JSON.stringify({ method: req.method, path: req.url, headers: req.headers, ...(body ? { body } : {}) }, null, 2)}\n`);
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { server, port: (server.address() as AddressInfo).port };
}

/** The dev config: the echo upstream, an AuthConfig with the plugin, a VirtualService for every host and path. JSON is YAML. */
function devManifests(name: string, config: Record<string, unknown>, echoPort: number): string {
  const docs = [
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: 'default' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echoPort }] } } },
    { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'dev', namespace: 'default' }, spec: { configs: [{ pluginAuth: { name, config } }] } },
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'dev', namespace: 'default' },
      spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], options: { extauth: { configRef: { name: 'dev' } } }, routeAction: { single: { upstream: { name: 'echo' } } } }] } },
    },
  ];
  return docs.map((doc) => JSON.stringify(doc, null, 2)).join('\n---\n');
}

/** Starts the dev loop; resolves once the first build is done and the gateway is starting. */
export async function startDev(options: DevOptions): Promise<DevSession> {
  const dir = resolve(options.dir);
  const entry = resolve(dir, options.entry ?? 'src/index.ts');
  if (!existsSync(entry)) throw new CodedError(DevCodes.BAD_PROJECT, `no plugin entry at ${entry}; run gatehouse-plugin dev in a project made by gatehouse-plugin init, or name the entry: gatehouse-plugin dev path/to/index.ts`);
  const name = options.name ?? (await nameOf(dir));
  const bin = gatehouseBin(dir);
  const work = await mkdtemp(join(tmpdir(), 'gatehouse-plugin-dev-'));
  const pluginDir = join(work, 'plugins');
  const configDir = join(work, 'config');
  let echo: Awaited<ReturnType<typeof startEcho>> | undefined;
  let child: ChildProcess | undefined;
  let watcher: FSWatcher | undefined;
  const cleanup = async () => {
    watcher?.close();
    echo?.server.closeAllConnections();
    echo?.server.close();
    await rm(work, { recursive: true, force: true });
  };
  try {
    const { mkdir } = await import('node:fs/promises');
    await mkdir(pluginDir);
    await mkdir(configDir);
    const build = async (): Promise<boolean> => {
      try {
        const result = await buildPlugin({ entry, name, outDir: pluginDir });
        for (const warning of result.warnings) options.err(`warning: ${warning}`);
        options.out(`built ${name} (${result.metadata.contentHash})`);
        return true;
      } catch (error) {
        options.err(`build failed, the last good build keeps serving: ${(error as Error).message}`);
        return false;
      }
    };
    if (!(await build())) throw new CodedError(DevCodes.BAD_PROJECT, 'the first build failed (see above)');
    echo = await startEcho();
    await writeFile(join(configDir, 'dev.yaml'), devManifests(name, options.config ?? {}, echo.port));
    const port = options.port ?? 8080;
    child = spawn(process.execPath, [bin, 'run', '--config-dir', configDir, '--plugin-dir', pluginDir, '--port', String(port), '--host', '127.0.0.1', '--admin-port', '0', '--extauth-port', '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, GATEHOUSE_LOG_LEVEL: process.env.GATEHOUSE_LOG_LEVEL ?? 'info' },
    });
    let announce: (url: string) => void = () => {};
    const url = new Promise<string>((done) => (announce = done));
    let buffered = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        options.out(line);
        try {
          const parsed = JSON.parse(line) as { msg?: string; port?: number };
          if (parsed.msg === 'listening' && typeof parsed.port === 'number') {
            const at = `http://127.0.0.1:${parsed.port}`;
            options.out(`gatehouse-plugin dev: ${at} → ${name} → an echo upstream; editing files under ${dirname(entry)} rebuilds the plugin`);
            announce(at);
          }
        } catch {
          // Not a JSON line.
        }
      }
    });
    const exited = new Promise<number | null>((done) => child!.once('exit', (code) => done(code)));
    // Rebuild on change (debounced: an editor writes several files at once).
    let timer: NodeJS.Timeout | undefined;
    let building = Promise.resolve();
    watcher = watch(dirname(entry), { recursive: true }, (_event, file) => {
      if (file && /(^|\/)(node_modules|\.git)\//.test(file)) return;
      clearTimeout(timer);
      timer = setTimeout(() => {
        building = building.then(async () => void (await build()));
      }, 100);
    });
    void exited.then(cleanup);
    return {
      url,
      exited,
      async stop() {
        clearTimeout(timer);
        if (child && child.exitCode === null) child.kill('SIGTERM');
        await exited;
      },
    };
  } catch (error) {
    child?.kill('SIGKILL');
    await cleanup();
    throw error;
  }
}
