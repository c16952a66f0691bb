import { describe, expect, test } from 'vitest';
import { createAccessLog, isoClock } from './access-log.ts';

describe('createAccessLog', () => {
  test('writes one JSON line per entry, with the fields operators query on', () => {
    const lines: string[] = [];
    const log = createAccessLog('gatehouse', { level: 'info', destination: { write: (l) => lines.push(l) } });
    log.write({ reqId: 'r-1', method: 'GET', path: '/a?q="x"\n', status: 200, durationMs: 1.25, virtualHost: 'default/vs', route: 'default/vs/0', upstream: 'http://127.0.0.1:1' });
    log.write({ reqId: undefined, method: 'GET', path: '/', status: 404, durationMs: 0.1, virtualHost: undefined, route: undefined, upstream: undefined });
    expect(lines.every((l) => l.endsWith('\n') && !l.slice(0, -1).includes('\n'))).toBe(true);
    const [first, second] = lines.map((l) => JSON.parse(l));
    expect(first).toEqual({
      level: 'info',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      pid: process.pid,
      name: 'gatehouse',
      reqId: 'r-1',
      method: 'GET',
      path: '/a?q="x"\n',
      status: 200,
      durationMs: 1.25,
      virtualHost: 'default/vs',
      route: 'default/vs/0',
      upstream: 'http://127.0.0.1:1',
      msg: 'access',
    });
    expect(second).toEqual({ level: 'info', time: expect.any(String), pid: process.pid, name: 'gatehouse', method: 'GET', path: '/', status: 404, durationMs: 0.1, msg: 'access' });
  });

  test('a level above info turns access lines off', () => {
    const lines: string[] = [];
    createAccessLog('g', { level: 'warn', destination: { write: (l) => lines.push(l) } }).write({ reqId: 'x', method: 'GET', path: '/', status: 200, durationMs: 1, virtualHost: 'v', route: 'r', upstream: 'u' });
    expect(lines).toEqual([]);
  });
});

describe('isoClock', () => {
  test('matches Date#toISOString across seconds and millisecond paddings', () => {
    let now = Date.UTC(2026, 10, 21, 7, 59, 59, 5);
    const clock = isoClock(() => now);
    for (const step of [0, 40, 60, 894, 1, 1000, 12_345]) {
      now += step;
      expect(clock()).toBe(new Date(now).toISOString());
    }
  });
});

describe('batchedWriter', () => {
  test('writes whole lines in batches of at most batchBytes, the rest on flush', async () => {
    const { mkdtemp, readFile } = await import('node:fs/promises');
    const { openSync, closeSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { batchedWriter } = await import('./access-log.ts');
    const file = join(await mkdtemp(join(tmpdir(), 'access-')), 'log');
    const fd = openSync(file, 'w');
    const writer = batchedWriter(fd, { batchBytes: 100, flushEveryMs: 60_000 });
    const line = `${'x'.repeat(39)}\n`;
    writer.write(line);
    writer.write(line);
    expect(await readFile(file, 'utf8')).toBe('');
    // A third line would pass 100 bytes: the first two go out as one batch.
    writer.write(line);
    expect(await readFile(file, 'utf8')).toBe(line.repeat(2));
    writer.write('tail\n');
    writer.flush();
    expect(await readFile(file, 'utf8')).toBe(`${line.repeat(3)}tail\n`);
    closeSync(fd);
  });

  test('two processes writing to one stdout pipe never interleave inside a line', async () => {
    const { spawn } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const module = fileURLToPath(new URL('./access-log.ts', import.meta.url));
    // Each writer sends 3000 distinct ~110-byte lines; both inherit the shell's one stdout pipe.
    const script = `import { batchedWriter } from ${JSON.stringify(module)};
      const w = batchedWriter(1); const id = process.argv[1];
      for (let i = 0; i < 3000; i++) w.write(JSON.stringify({ id, i, pad: 'p'.repeat(80) }) + '\\n');
      w.flush();`;
    const node = JSON.stringify(process.execPath);
    const out = await new Promise<string>((resolve) => {
      const child = spawn('sh', ['-c', `${node} --input-type=module -e "$SCRIPT" a & ${node} --input-type=module -e "$SCRIPT" b & wait`], {
        env: { ...process.env, SCRIPT: script },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let text = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (text += c));
      child.on('close', () => resolve(text));
    });
    const lines = out.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string; i: number });
    expect(lines).toHaveLength(6000);
    for (const id of ['a', 'b']) expect(lines.filter((l) => l.id === id).map((l) => l.i)).toEqual([...Array(3000).keys()]);
  });
});
