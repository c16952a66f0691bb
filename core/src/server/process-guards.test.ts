import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const GUARDS = fileURLToPath(new URL('./process-guards.ts', import.meta.url));
const LOGGER = fileURLToPath(new URL('../log/logger.ts', import.meta.url));

/** Runs `body` in a fresh Node process with the guards installed; resolves with its exit and output. */
function run(body: string): Promise<{ code: number | null; stdout: string }> {
  const script = `
    import { installProcessGuards } from ${JSON.stringify(GUARDS)};
    import { createLogger, flushLogs } from ${JSON.stringify(LOGGER)};
    const logger = createLogger('test');
    installProcessGuards(logger);
    ${body}
  `;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 }, (error, stdout) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout });
    });
  });
}

describe('installProcessGuards (issue 17)', () => {
  test('an uncaught exception and an unhandled rejection are logged with GH_UNHANDLED and the process keeps running', async () => {
    const { code, stdout } = await run(`
      setTimeout(() => { throw new Error('thrown outside any handler'); }, 10);
      setTimeout(() => { Promise.reject(new Error('rejected, never caught')); }, 20);
      setTimeout(() => { console.log(JSON.stringify({ msg: 'still alive' })); flushLogs(); process.exit(0); }, 200);
    `);
    expect(code).toBe(0);
    expect(stdout).toContain('still alive');
    expect(stdout).toContain('thrown outside any handler');
    expect(stdout).toContain('rejected, never caught');
    expect(stdout.match(/GH_UNHANDLED/g)?.length).toBe(2);
  });

  test('a flood of them (over 100 a minute) exits non-zero, for the supervisor to restart the process', async () => {
    const { code } = await run(`
      for (let i = 0; i < 150; i++) setTimeout(() => { throw new Error('again ' + i); }, 1);
      setTimeout(() => process.exit(0), 3000);
    `);
    expect(code).toBe(1);
  });
});
