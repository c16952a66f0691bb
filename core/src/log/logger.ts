import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON-lines logger (pino). `GATEHOUSE_LOG_LEVEL` sets the level (default info);
 * the destination is stdout, written asynchronously so logging never blocks a request.
 */
export function createLogger(name: string, options: { level?: string; destination?: number | string } = {}): Logger {
  const level = options.level ?? process.env.GATEHOUSE_LOG_LEVEL ?? 'info';
  const destination = pino.destination({ dest: options.destination ?? 1, sync: false });
  const logger = pino(
    {
      name,
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
  flushers.add(() => destination.flushSync());
  return logger;
}

const flushers = new Set<() => void>();

/** Flushes every logger's buffer; call before the process exits. */
export function flushLogs(): void {
  for (const flush of flushers) {
    try {
      flush();
    } catch {
      // A destination that is not ready yet has nothing buffered.
    }
  }
}
