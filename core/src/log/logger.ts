import { pino, type Logger } from 'pino';

export type { Logger };

const flushers = new Set<() => void>();

/**
 * JSON-lines logger (pino) on stdout. `GATEHOUSE_LOG_LEVEL` sets the level (default info).
 * Writes are asynchronous but not batched: operational lines (`listening`, config loads,
 * errors) must appear at once, for operators and for tools that wait for them.
 */
export function createLogger(name: string, options: { level?: string } = {}): Logger {
  return build(name, options.level);
}

function build(name: string, level: string | undefined): Logger {
  const destination = pino.destination({ dest: 1, sync: false });
  flushers.add(() => destination.flushSync());
  return pino(
    {
      name,
      level: level ?? process.env.GATEHOUSE_LOG_LEVEL ?? 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

/** Flushes every logger's buffer; call before the process exits. */
export function flushLogs(): void {
  for (const flush of flushers) {
    try {
      flush();
    } catch {
      // A destination that is not open yet has nothing buffered.
    }
  }
}
