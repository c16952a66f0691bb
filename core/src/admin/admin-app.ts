import { Hono } from 'hono';
import type { ConfigSnapshot } from '../config/store.ts';
import { GATEWAY_VERSION } from '../version.ts';

export interface AdminSources {
  /** The latest configuration snapshot, once the first load finished. */
  snapshot(): ConfigSnapshot | undefined;
  /** Effective routes of the serving route table. */
  routes(): unknown[];
  /** Prometheus text exposition. */
  metrics(): Promise<{ contentType: string; body: string }>;
  /** Why the process is not ready beyond the configuration (e.g. workers missing), or undefined. */
  notReady?(): string | undefined;
  /** Lines added to a ready answer (e.g. the Kubernetes API connection), or undefined. */
  readyDetail?(): string | undefined;
}

/** The admin API (SPEC 8): health, readiness, metrics and config status. Not on the traffic path. */
export function createAdminApp(sources: AdminSources): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.text('ok\n'));
  app.get('/readyz', (c) => {
    if (!sources.snapshot()) return c.text('configuration not loaded yet\n', 503);
    const reason = sources.notReady?.();
    if (reason) return c.text(`${reason}\n`, 503);
    const detail = sources.readyDetail?.();
    return c.text(detail ? `ready\n${detail}\n` : 'ready\n');
  });
  app.get('/metrics', async (c) => {
    const { contentType, body } = await sources.metrics();
    return c.body(body, 200, { 'content-type': contentType });
  });
  app.get('/config', (c) => {
    const snapshot = sources.snapshot();
    if (!snapshot) return c.json({ error: 'configuration not loaded yet' }, 503);
    return c.json({
      version: GATEWAY_VERSION,
      generation: snapshot.generation,
      resources: snapshot.statuses,
      errors: snapshot.diagnostics.filter((d) => !d.resource),
      routes: sources.routes(),
    });
  });
  app.notFound((c) => c.text('not found: try /healthz, /readyz, /metrics or /config\n', 404));
  return app;
}
