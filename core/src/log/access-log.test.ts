import { describe, expect, test } from 'vitest';
import { createAccessLog } from './access-log.ts';

/** A sink keeping each line as text (the encoder reuses its buffer, so copy at once). */
const collect = (lines: string[]) => ({ write: (line: Uint8Array) => lines.push(Buffer.from(line).toString('utf8')) });

describe('createAccessLog', () => {
  test('writes one JSON line per entry, with the fields operators query on', () => {
    const lines: string[] = [];
    const log = createAccessLog('gatehouse', { level: 'info', destination: collect(lines) });
    log.write({ reqId: 'r-1', method: 'GET', path: '/a?q="x"\n', status: 200, durationMs: 1.25, virtualHost: 'default/vs', route: 'default/vs/0', upstream: 'http://127.0.0.1:1' });
    log.write({ reqId: undefined, method: 'GET', path: '/', status: 404, durationMs: 0.1, virtualHost: undefined, route: undefined, upstream: undefined });
    log.flush();
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
    createAccessLog('g', { level: 'warn', destination: collect(lines) }).write({ reqId: 'x', method: 'GET', path: '/', status: 200, durationMs: 1, virtualHost: 'v', route: 'r', upstream: 'u' });
    expect(lines).toEqual([]);
  });

  test('escapes what JSON needs escaped, keeps non-ASCII text, and grows for long values', () => {
    const lines: string[] = [];
    const log = createAccessLog('gate"house', { level: 'info', destination: collect(lines) });
    const odd = ['/caf\u00e9/\u{1f600}', '/tab\there', '/back\\slash', '/"quoted"', '/\u007f', `/${'x'.repeat(5000)}`, ''];
    for (const path of odd) log.write({ reqId: path, method: 'PATCH', path, status: 599, durationMs: 1e-7, virtualHost: path, route: path, upstream: path });
    log.flush();
    const parsed = lines.map((l) => JSON.parse(l));
    expect(parsed.map((p) => p.path)).toEqual(odd);
    expect(parsed.map((p) => [p.reqId, p.virtualHost, p.route, p.upstream])).toEqual(odd.map((p) => [p, p, p, p]));
    expect(parsed.every((p) => p.name === 'gate"house' && p.method === 'PATCH' && p.status === 599 && p.durationMs === 1e-7)).toBe(true);
  });

  test('status and durationMs are written exactly as String() writes them, whatever the number', () => {
    const lines: string[] = [];
    const log = createAccessLog('g', { level: 'info', destination: collect(lines) });
    // The gateway's durations (microseconds / 1000, as it rounds them) across magnitudes, then odd ones.
    const durations = [0, 0.001, 0.01, 0.1, 0.5, 1, 1.001, 1.01, 1.1, 1.25, 9.999, 10, 12.345, 100.05, 999.999, 1000, 65_535.5, 2_147_483.647];
    for (let micros = 0; micros < 3_000_000; micros += 7_919) durations.push(Math.round(micros) / 1000);
    durations.push(1e-7, 0.0005, 1.23456, 2_147_483.648, 1e21, 123_456_789_012.5, -1, -0.5, Number.NaN, Number.POSITIVE_INFINITY);
    const statuses = [0, 101, 200, 204, 404, 599, 9, 10, 99, 100, 1000, -1, 200.5, Number.NaN];
    for (let i = 0; i < durations.length; i++) log.write({ reqId: undefined, method: 'GET', path: '/', status: statuses[i % statuses.length]!, durationMs: durations[i]!, virtualHost: undefined, route: undefined, upstream: undefined });
    log.flush();
    expect(lines).toHaveLength(durations.length);
    lines.forEach((line, i) => {
      expect(line).toContain(`,"status":${String(statuses[i % statuses.length])},"durationMs":${String(durations[i])},`);
    });
  });

  test('entries are encoded in runs of batchEntries, the rest on flush or at exit', async () => {
    const lines: string[] = [];
    const log = createAccessLog('g', { level: 'info', destination: collect(lines), batchEntries: 3, flushEveryMs: 60_000 });
    const entry = (i: number) => ({ reqId: `r${i}`, method: 'GET', path: '/', status: 200, durationMs: 1, virtualHost: undefined, route: undefined, upstream: undefined });
    log.write(entry(1));
    log.write(entry(2));
    expect(lines).toEqual([]);
    log.write(entry(3));
    log.write(entry(4));
    expect(lines.map((l) => JSON.parse(l).reqId)).toEqual(['r1', 'r2', 'r3']);
    log.flush();
    expect(lines.map((l) => JSON.parse(l).reqId)).toEqual(['r1', 'r2', 'r3', 'r4']);

    // A process that exits with entries still queued writes them on the way out.
    const { execFileSync } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const module = JSON.stringify(fileURLToPath(new URL('./access-log.ts', import.meta.url)));
    const script = `import { createAccessLog } from ${module};
      const log = createAccessLog('g', { level: 'info' });
      for (let i = 0; i < 3; i++) log.write({ reqId: 'x' + i, method: 'GET', path: '/', status: 200, durationMs: 1 });`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(out.trimEnd().split('\n').map((l) => JSON.parse(l).reqId)).toEqual(['x0', 'x1', 'x2']);
  });

  test('time matches Date#toISOString across seconds and millisecond paddings', () => {
    let now = Date.UTC(2026, 10, 21, 7, 59, 59, 5);
    const lines: string[] = [];
    const log = createAccessLog('g', { level: 'info', destination: collect(lines), now: () => now });
    const expected: string[] = [];
    for (const step of [0, 40, 60, 894, 1, 1000, 12_345]) {
      now += step;
      expected.push(new Date(now).toISOString());
      log.write({ reqId: undefined, method: 'GET', path: '/', status: 200, durationMs: 1, virtualHost: undefined, route: undefined, upstream: undefined });
    }
    // Encoded later, stamped with the time each entry was written.
    now += 5000;
    log.flush();
    expect(lines.map((l) => JSON.parse(l).time)).toEqual(expected);
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
    const writer = batchedWriter(fd, { batchBytes: 100 });
    const line = `${'x'.repeat(39)}\n`;
    const write = (text: string) => writer.write(Buffer.from(text));
    write(line);
    write(line);
    expect(await readFile(file, 'utf8')).toBe('');
    // A third line would pass 100 bytes: the first two go out as one batch.
    write(line);
    expect(await readFile(file, 'utf8')).toBe(line.repeat(2));
    write('tail\n');
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
      for (let i = 0; i < 3000; i++) w.write(Buffer.from(JSON.stringify({ id, i, pad: 'p'.repeat(80) }) + '\\n'));
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

describe('createFormattedAccessLog', () => {
  test('reads each line when the entry is written (later changes do not show), encodes in runs, per sink with its filter', async () => {
    const { mkdtemp, readFile } = await import('node:fs/promises');
    const { openSync, closeSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { createFormattedAccessLog } = await import('./access-log.ts');
    const { compileJsonFormat, compileStringFormat } = await import('./access-format.ts');
    const dir = await mkdtemp(join(tmpdir(), 'formatted-'));
    const fds = new Map<string, number>();
    const open = (path: string) => {
      const fd = openSync(join(dir, path), 'a');
      fds.set(path, fd);
      return fd;
    };
    const now = Date.UTC(2026, 10, 29, 1, 2, 3, 7);
    const log = createFormattedAccessLog(
      [
        { path: 'text', format: compileStringFormat('[%START_TIME%] %REQ(:METHOD)% %REQ(X-ID)% %RESPONSE_CODE% %DURATION% %RESP(X-UP)% %ROUTE_NAME% é\n') },
        { path: 'errors', format: compileJsonFormat({ id: '%REQ(X-ID)%', status: '%RESPONSE_CODE%' }), filter: (e) => e.status >= 500 },
      ],
      { open, now: () => now, batchEntries: 2 },
    );
    const entries = [200, 503, 201].map((status, i) => ({
      reqId: `r${i}`,
      method: 'GET',
      path: '/',
      status,
      durationMs: 1000 + i,
      virtualHost: 'v',
      route: `route-${i}`,
      upstream: undefined,
      req: { method: 'GET', url: '/', headers: { 'x-id': `id-${i}-ü` }, socket: {} } as never,
      res: { getHeader: (name: string) => (name === 'x-up' ? `up-${i}` : undefined) } as never,
    }));
    for (const entry of entries) log.write(entry);
    // The queued lines hold what was read when each entry was written.
    for (const entry of entries) {
      entry.status = 0;
      (entry.req as { headers: Record<string, string> }).headers['x-id'] = 'changed';
    }
    log.close();
    for (const fd of fds.values()) closeSync(fd);
    expect(await readFile(join(dir, 'text'), 'utf8')).toBe(
      ['[2026-11-29T01:02:02.007Z] GET id-0-ü 200 1000 up-0 route-0 é', '[2026-11-29T01:02:02.006Z] GET id-1-ü 503 1001 up-1 route-1 é', '[2026-11-29T01:02:02.005Z] GET id-2-ü 201 1002 up-2 route-2 é', ''].join('\n'),
    );
    expect((await readFile(join(dir, 'errors'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l))).toEqual([{ id: 'id-1-ü', status: 503 }]);
  });
});
