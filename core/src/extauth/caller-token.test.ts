import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileCallerToken, fixedCallerToken } from './caller-token.ts';

describe('caller tokens', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'caller-token-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses short tokens, tokens with spaces and unreadable files', async () => {
    expect(() => fixedCallerToken('short')).toThrow(/at least 16/);
    expect(() => fixedCallerToken('sixteen chars ok')).toThrow(/without spaces/);
    expect(() => fileCallerToken(join(dir, 'missing'))).toThrow(/cannot be read/);
  });

  it('reads a rotated file again, accepting the previous token for a grace period, and keeps the last good one on a bad read', async () => {
    const path = join(dir, 'token');
    await writeFile(path, 'first-token-0123456789\n');
    let now = 0;
    const token = fileCallerToken(path, () => now);
    expect(token.accepted()).toEqual(['first-token-0123456789']);
    await writeFile(path, 'second-token-0123456789');
    now = 1_000;
    expect(token.accepted()).toEqual(['first-token-0123456789']); // not read again yet
    now = 6_000;
    expect(token.accepted()).toEqual(['second-token-0123456789', 'first-token-0123456789']);
    await writeFile(path, 'bad');
    now = 12_000;
    expect(token.accepted()).toEqual(['second-token-0123456789', 'first-token-0123456789']);
    now = 6_000 + 5 * 60_000 + 1;
    expect(token.accepted()).toEqual(['second-token-0123456789']);
  });
});
