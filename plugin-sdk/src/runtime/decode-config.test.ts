import { describe, expect, it } from 'vitest';
import { ConfigDecodeError, decodeConfig } from './decode-config.ts';

describe('decodeConfig (Go json.Unmarshal-like)', () => {
  it('sets fields on the object it was given and returns that object', () => {
    const target = { RequiredHeader: '', AllowedValues: [] as string[] };
    const result = decodeConfig(target, { RequiredHeader: 'x-a', AllowedValues: ['1'] });
    expect(result).toBe(target);
    expect(target).toEqual({ RequiredHeader: 'x-a', AllowedValues: ['1'] });
  });

  it('matches keys exactly first, then case-insensitively', () => {
    expect(decodeConfig({ Name: '', name: '' }, { name: 'exact' })).toEqual({ Name: '', name: 'exact' });
    expect(decodeConfig({ RequiredHeader: '' }, { requiredheader: 'x' })).toEqual({ RequiredHeader: 'x' });
  });

  it('keeps defaults for absent keys and for JSON null', () => {
    expect(decodeConfig({ Limit: 10, Mode: 'a' }, { Mode: null })).toEqual({ Limit: 10, Mode: 'a' });
  });

  it('rejects an unknown key, naming the path and the fields', () => {
    expect(() => decodeConfig({ A: '', B: 0 }, { C: 1 })).toThrow(new ConfigDecodeError('config.C', "unknown field; the plugin's config has A, B"));
  });

  it('rejects a type mismatch with the path', () => {
    expect(() => decodeConfig({ Limit: 0 }, { Limit: '5' })).toThrow('config.Limit: expected a number, got a string');
    expect(() => decodeConfig({ On: false }, { On: 'yes' })).toThrow('config.On: expected a boolean, got a string');
    expect(() => decodeConfig({ List: [] }, { List: {} })).toThrow('config.List: expected an array, got an object');
    expect(() => decodeConfig({ Inner: { A: '' } }, { Inner: [] })).toThrow('config.Inner: expected an object, got an array');
    expect(() => decodeConfig({ Inner: { A: 0 } }, { Inner: { A: true } })).toThrow('config.Inner.A: expected a number, got a boolean');
  });

  it('decodes nested structs in place, arrays replace', () => {
    const inner = { Host: 'h', Port: 1 };
    const target = { Upstream: inner, Tags: ['default'] };
    decodeConfig(target, { upstream: { port: 2 }, tags: ['a', 'b'] });
    expect(target).toEqual({ Upstream: { Host: 'h', Port: 2 }, Tags: ['a', 'b'] });
    expect(target.Upstream).toBe(inner);
  });

  it('an empty object is a map: any keys, values as given, __proto__ stays a plain key', () => {
    const target = { Labels: {} as Record<string, unknown> };
    decodeConfig(target, { Labels: JSON.parse('{"team":"a","__proto__":{"polluted":true}}') });
    expect(Object.keys(target.Labels)).toEqual(['team', '__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(target.Labels)).toBe(Object.prototype);
  });

  it('a null or undefined field takes any JSON value; a null or undefined default takes the whole config', () => {
    expect(decodeConfig({ Extra: null }, { Extra: { any: [1] } })).toEqual({ Extra: { any: [1] } });
    expect(decodeConfig(undefined, { a: 1 })).toEqual({ a: 1 });
  });

  it('keeps class instances (methods survive, as with a Go pointer receiver)', () => {
    class Config {
      Header = 'x';
      upper() {
        return this.Header.toUpperCase();
      }
    }
    const decoded = decodeConfig(new Config(), { header: 'y' }) as Config;
    expect(decoded.upper()).toBe('Y');
  });
});
