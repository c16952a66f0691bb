/**
 * "Nothing accepted silently" (issue 31; SPEC 2.4): every field the custom kinds' schemas accept is
 * either honoured by a module named in ./honoured-fields.ts or marked `Ignored`, in which case
 * setting it gives a warning naming it. A new schema field without either fails here.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { acceptedFieldPaths } from './accepted-fields.ts';
import { HONOURED_FIELDS } from './honoured-fields.ts';
import { checkIgnoredFields } from './checks/ignored-fields.ts';
import { CRD_KINDS, CRD_KIND_NAMES } from './schema/kinds.ts';
import type { AnyResource } from './resource.ts';
import type { CheckContext } from './store.ts';
import { formatPath, type PathSegment } from './diagnostic.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const sources = new Map<string, string>();
const source = (file: string) => {
  let text = sources.get(file);
  if (text === undefined) sources.set(file, (text = existsSync(ROOT + file) ? readFileSync(ROOT + file, 'utf8') : ''));
  return text;
};

/** A spec holding only the field at `path` (lists get one item, maps one key). */
function specWith(path: string): { spec: Record<string, unknown>; at: PathSegment[] } {
  const spec: Record<string, unknown> = {};
  const at: PathSegment[] = ['spec'];
  let node: Record<string, unknown> = spec;
  const segments = path.split('.');
  segments.forEach((segment, i) => {
    const last = i === segments.length - 1;
    const list = segment.endsWith('[]');
    const key = list ? segment.slice(0, -2) : segment === '*' ? 'key' : segment;
    at.push(key);
    if (last) {
      node[key] = list ? [true] : true;
      return;
    }
    const child: Record<string, unknown> = {};
    if (list) {
      node[key] = [child];
      at.push(0);
    } else node[key] = child;
    node = child;
  });
  return { spec, at };
}

const ctx: CheckContext = {
  resources: new Map(),
  at: (path, code, message, severity = 'error') => ({ code, message, severity, path: formatPath(path) }),
};

describe('nothing accepted silently: every accepted field is honoured or warned', () => {
  for (const kind of CRD_KIND_NAMES) {
    test(`${kind}: each field is in the honoured registry (its module names it) or marked Ignored (a warning names it when set)`, () => {
      const accepted = acceptedFieldPaths(CRD_KINDS[kind].spec);
      expect(accepted.length).toBeGreaterThan(0);
      const registry = HONOURED_FIELDS[kind];
      const unaccounted: string[] = [];
      const wrongModule: string[] = [];
      const silent: string[] = [];
      for (const field of accepted) {
        const entry = registry[field.path];
        if (field.ignored) {
          if (entry !== undefined) unaccounted.push(`${field.path}: marked Ignored and listed as honoured`);
          // Setting it gives a warning naming it, through the check the store runs on every resource.
          const { spec, at } = specWith(field.path);
          const resource = { kind, spec, namespace: 'ns', name: 'n', key: `${kind}/ns/n` } as unknown as AnyResource;
          const warnings = checkIgnoredFields(resource, ctx);
          const name = String(at[at.length - 1] === 0 ? at[at.length - 2] : at[at.length - 1]);
          if (!warnings.some((w) => w.severity === 'warning' && w.code === 'GH_CONFIG_IGNORED' && w.path === formatPath(at.filter((s, i) => !(s === 0 && i === at.length - 1))) && w.message.startsWith(`${name} is not applied: `))) silent.push(field.path);
          continue;
        }
        if (entry === undefined) {
          unaccounted.push(field.path);
          continue;
        }
        const [module, why] = typeof entry === 'string' ? [entry, undefined] : entry;
        const name = field.path.split('.').pop()!.replace(/\[\]$/, '');
        const text = source(module);
        if (text === '') wrongModule.push(`${field.path}: ${module} does not exist`);
        else if (why === undefined && name !== '*' && !new RegExp(`(^|[^A-Za-z0-9_])${name}\\b`).test(text)) wrongModule.push(`${field.path}: ${module} does not mention "${name}"`);
      }
      expect(unaccounted, `fields accepted but neither honoured (core/src/config/honoured-fields.ts) nor marked Ignored in the schema`).toEqual([]);
      expect(wrongModule, 'registry entries whose module does not handle the field').toEqual([]);
      expect(silent, 'Ignored fields that give no warning naming them').toEqual([]);
      const stale = Object.keys(registry).filter((path) => !accepted.some((f) => f.path === path));
      expect(stale, `registry entries for fields ${kind} no longer accepts`).toEqual([]);
    });
  }

  test('a new field without a registry entry or an Ignored mark is caught', () => {
    const schema = { type: 'object', properties: { known: { type: 'string' }, brandNew: { type: 'string' }, quiet: { type: 'string', 'x-gatehouse-ignored': 'why' } } };
    expect(acceptedFieldPaths(schema)).toEqual([
      { path: 'brandNew', ignored: false },
      { path: 'known', ignored: false },
      { path: 'quiet', ignored: true },
    ]);
  });
});
