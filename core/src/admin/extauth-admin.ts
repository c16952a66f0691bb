import { getRequestListener } from '@hono/node-server';
import { Hono } from 'hono';
import type { Server } from 'node:http';
import type { BuildReport } from '../extauth/engine.ts';
import { GATEWAY_VERSION } from '../version.ts';
import { registry } from './metrics.ts';

/** What the extauth admin API reads from the running auth server. */
export interface ExtAuthAdminSources {
  /** True once a first configuration is served. */
  ready(): boolean;
  /** Every AuthConfig's build result. */
  buildReport(): BuildReport[];
}

/**
 * `gatehouse extauth --admin-port` (issue 27 item 7): `/healthz`, `/readyz`, `/metrics`
 * (decisions by config, step and result; plugin call latency; egress calls; unavailable configs)
 * and `/configs` (each AuthConfig's build result). `/readyz` stays 200 while some AuthConfigs
 * cannot be built (the others serve; restarting would not help) and names them.
 */
export function createExtAuthAdminApp(sources: ExtAuthAdminSources): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.text('ok\n'));
  app.get('/readyz', (c) => {
    if (!sources.ready()) return c.text('configuration not loaded yet\n', 503);
    const failed = sources.buildReport().filter((r) => r.failure);
    if (failed.length === 0) return c.text('ready\n');
    return c.text(`ready\n${failed.length} AuthConfig(s) cannot be built, their requests are denied:\n${failed.map((r) => `  ${r.configId}: ${r.failure!.message} [${r.failure!.code}]`).join('\n')}\n`);
  });
  app.get('/metrics', async (c) => c.body(await registry.metrics(), 200, { 'content-type': registry.contentType }));
  app.get('/configs', (c) => c.json({ version: GATEWAY_VERSION, ready: sources.ready(), configs: sources.buildReport() }));
  app.notFound((c) => c.text('not found: try /healthz, /readyz, /metrics or /configs\n', 404));
  return app;
}

/** Starts the extauth admin API on `host:port` (0: a free port); resolves with the bound port. */
export async function startExtAuthAdmin(sources: ExtAuthAdminSources, port: number, host: string): Promise<{ port: number; server: Server }> {
  const { listen } = await import('../server/listen.ts');
  return listen(getRequestListener(createExtAuthAdminApp(sources).fetch), port, host);
}
