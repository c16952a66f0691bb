import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

export interface GatehouseProcess {
  readonly child: ChildProcess;
  /** Traffic port (gateway) or gRPC port (extauth). */
  readonly port: number;
  readonly adminPort?: number;
  readonly extauthPort?: number;
  /** The `listening` log line. */
  readonly listening: Record<string, unknown>;
  /** Every JSON log line so far. */
  readonly logs: Record<string, unknown>[];
  /** What the process wrote to stderr so far. */
  stderr(): string;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly adminUrl: string;
  /** Resolves with the first log line that satisfies `predicate` (already seen or future). */
  waitForLog(predicate: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Sends a signal and waits for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `gatehouse <command> …args` as a real process on 127.0.0.1 with port 0 and waits
 * for its `listening` line. The process is the same one users run (`npx gatehouse`).
 */
export async function startGatehouse(command: 'run' | 'gateway' | 'extauth', args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number; /** false: no `--https-port` (the listener binds 8443 only for TLS VirtualServices). */ httpsPort?: false } = {}): Promise<GatehouseProcess> {
  const https = options.httpsPort === false ? [] : ['--https-port', '0'];
  const portArgs = command === 'extauth' ? ['--port', '0', '--admin-port', '0'] : ['--port', '0', ...https, '--admin-port', '0', '--host', '127.0.0.1', ...(command === 'run' ? ['--extauth-port', '0'] : [])];
  const child = spawn(process.execPath, [...NODE_FLAGS, CLI, command, ...portArgs, ...args], {
    env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  const waiters = new Set<{ predicate: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }>();
  let stderr = '';
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = { msg: line, unparsed: true };
      }
      logs.push(parsed);
      for (const w of waiters) if (w.predicate(parsed)) (waiters.delete(w), w.resolve(parsed));
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const waitForLog = (predicate: (l: Record<string, unknown>) => boolean, timeoutMs = 10_000) => {
    const seen = logs.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const waiter = { predicate, resolve: (l: Record<string, unknown>) => (clearTimeout(timer), resolve(l)) };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`timed out waiting for a log line; stderr:\n${stderr}\nlogs:\n${logs.map((l) => JSON.stringify(l)).join('\n')}`));
      }, timeoutMs);
      waiters.add(waiter);
    });
  };

  let listening: Record<string, unknown>;
  try {
    listening = await Promise.race([
      // 30 s: under the full suite on 2 cores (load 14-18) a start took over 15 s.
      waitForLog((l) => l.msg === 'listening', options.timeoutMs ?? 30_000),
      exited.then((code) => {
        throw new Error(`gatehouse ${command} exited with ${code} before listening:\n${stderr}\n${logs.map((l) => JSON.stringify(l)).join('\n')}`);
      }),
    ]);
  } catch (error) {
    // A process that never came up must not outlive the test (it would keep ports and retry forever).
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw error;
  }
  const port = listening.port as number;
  const adminPort = listening.adminPort as number | undefined;
  return {
    child,
    port,
    ...(adminPort !== undefined ? { adminPort } : {}),
    ...(listening.extauthPort !== undefined ? { extauthPort: listening.extauthPort as number } : {}),
    listening,
    logs,
    stderr: () => stderr,
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    waitForLog,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
