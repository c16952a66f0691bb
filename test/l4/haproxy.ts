import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { eventually } from '../support/http.ts';
import { freePort } from '../support/ports.ts';

/** The haproxy binary (Debian's, test/l4/install-haproxy.sh), or undefined with a loud SKIPPED line; under CI a missing one fails. */
export function findHaproxy(testFile: string): string | undefined {
  for (const candidate of ['/usr/sbin/haproxy', 'haproxy']) {
    if (spawnSync(candidate, ['-v'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  const message = 'haproxy is not installed (bash test/l4/install-haproxy.sh)';
  if (process.env.CI === 'true') throw new Error(`${testFile}: ${message}`);
  console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  return undefined;
}

/** A running HAProxy in TCP mode: each frontend port forwards to a target with a PROXY header. */
export interface Haproxy {
  /** Frontend port of each name given to {@link startHaproxy}. */
  readonly ports: Record<string, number>;
  stop(): Promise<void>;
}

/**
 * Starts HAProxy as a TCP load balancer in front of Gatehouse: frontend `name` listens on
 * `bind` (a loopback address) and sends every connection to `target` with `send` (`send-proxy`:
 * v1, `send-proxy-v2`: v2).
 */
export async function startHaproxy(binary: string, dir: string, frontends: Record<string, { bind: string; target: number; send: 'send-proxy' | 'send-proxy-v2' }>): Promise<Haproxy> {
  const ports: Record<string, number> = {};
  const sections: string[] = [];
  for (const [name, f] of Object.entries(frontends)) {
    ports[name] = await freePort();
    sections.push(`frontend fe_${name}\n  bind ${f.bind}:${ports[name]}\n  default_backend be_${name}\n\nbackend be_${name}\n  server gh 127.0.0.1:${f.target} ${f.send}\n`);
  }
  const file = join(dir, `haproxy-${Object.keys(frontends).join('-')}.cfg`);
  await writeFile(file, `defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\n${sections.join('\n')}`);
  const child: ChildProcess = spawn(binary, ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  // Up when every frontend accepts.
  await eventually(async () => {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${stderr}`);
    const up = await Promise.all(
      Object.entries(frontends).map(
        ([name, f]) =>
          new Promise<boolean>((resolve) => {
            const s = connect(ports[name]!, f.bind);
            s.once('connect', () => (s.destroy(), resolve(true)));
            s.once('error', () => resolve(false));
          }),
      ),
    );
    return up.every(Boolean);
  });
  return {
    ports,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
