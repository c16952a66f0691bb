import { describe, expect, test } from 'vitest';
import { GatehouseError } from '../errors.ts';
import { describeFlags, envName, parseFlags, portValue, requiredValue, type FlagDef } from './flags.ts';

const DEFS: FlagDef[] = [
  { name: 'config-dir', type: 'string', description: 'config' },
  { name: 'port', type: 'string', default: '8080', description: 'port' },
  { name: 'verbose', type: 'boolean', description: 'more output' },
  { name: 'resolve', type: 'string', multiple: true, description: 'HOST=ADDR' },
];

describe('parseFlags (SPEC 9: every flag also has an environment variable)', () => {
  test('env names are GATEHOUSE_ + the flag in upper snake case', () => {
    expect(envName('config-dir')).toBe('GATEHOUSE_CONFIG_DIR');
    expect(envName('extauth-failure-mode-allow')).toBe('GATEHOUSE_EXTAUTH_FAILURE_MODE_ALLOW');
  });

  test('command line beats environment beats default', () => {
    expect(parseFlags(['--port', '1'], DEFS, { GATEHOUSE_PORT: '2' }).values.port).toBe('1');
    expect(parseFlags([], DEFS, { GATEHOUSE_PORT: '2' }).values.port).toBe('2');
    expect(parseFlags([], DEFS, {}).values.port).toBe('8080');
    // An empty variable counts as unset.
    expect(parseFlags([], DEFS, { GATEHOUSE_PORT: '' }).values.port).toBe('8080');
  });

  test('booleans from the environment accept 1/true/yes/on', () => {
    for (const yes of ['1', 'true', 'YES', 'on']) expect(parseFlags([], DEFS, { GATEHOUSE_VERBOSE: yes }).values.verbose).toBe(true);
    expect(parseFlags([], DEFS, { GATEHOUSE_VERBOSE: 'no' }).values.verbose).toBe(false);
    expect(parseFlags(['--verbose'], DEFS, {}).values.verbose).toBe(true);
  });

  test('repeatable flags collect values; from the environment they are comma-separated', () => {
    expect(parseFlags(['--resolve', 'a=1', '--resolve', 'b=2'], DEFS, {}).values.resolve).toEqual(['a=1', 'b=2']);
    expect(parseFlags([], DEFS, { GATEHOUSE_RESOLVE: 'a=1, b=2' }).values.resolve).toEqual(['a=1', 'b=2']);
  });

  test('positionals are returned; unknown flags are GH_BAD_ARGUMENT errors', () => {
    expect(parseFlags(['a.yaml', 'b.yaml'], DEFS, {}).positionals).toEqual(['a.yaml', 'b.yaml']);
    try {
      parseFlags(['--colour', 'red'], DEFS, {});
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(GatehouseError);
      expect((error as GatehouseError).code).toBe('GH_BAD_ARGUMENT');
      expect((error as Error).message).toContain('--colour');
    }
  });
});

describe('value helpers', () => {
  test('portValue accepts 0..65535 and names the flag otherwise', () => {
    expect(portValue({ port: '0' }, 'port')).toBe(0);
    expect(portValue({ port: '65535' }, 'port')).toBe(65535);
    for (const bad of ['65536', '-1', '80.5', 'http', undefined]) {
      expect(() => portValue({ port: bad }, 'port')).toThrow(/--port must be a port number from 0 to 65535/);
    }
  });

  test('requiredValue names the flag and its environment variable', () => {
    expect(requiredValue({ 'config-dir': '/etc/gh' }, 'config-dir')).toBe('/etc/gh');
    expect(() => requiredValue({}, 'config-dir')).toThrow('--config-dir is required (or set GATEHOUSE_CONFIG_DIR)');
    expect(() => requiredValue({ 'config-dir': '' }, 'config-dir')).toThrow(GatehouseError);
  });

  test('describeFlags lists each flag with its default and environment variable', () => {
    const help = describeFlags(DEFS);
    expect(help).toContain('--port VALUE');
    expect(help).toContain('(default 8080) [GATEHOUSE_PORT]');
    expect(help).toMatch(/--verbose\s+more output \[GATEHOUSE_VERBOSE\]/);
  });
});
