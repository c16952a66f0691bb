import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOC_FILE, entriesOf, REGISTRIES, renderErrorsDoc, ROOT, sourceCodes } from '../scripts/errors-doc.ts';

// Issue 26: one error-code registry per package, every code documented in docs/errors.md.

describe('error-code registries', () => {
  for (const registry of REGISTRIES) {
    describe(registry.package, () => {
      it('registers every GH_ code its sources use as a string literal', () => {
        const registered = new Set(entriesOf(registry).map((e) => e.code));
        const missing = [...sourceCodes(registry.sources)].filter(([code]) => !registered.has(code)).map(([code, files]) => `${code} (${[...files].join(', ')})`);
        expect(missing, 'add them to a *Codes table or to the registry\'s literals').toEqual([]);
      });

      it('describes every code in one line', () => {
        const undescribed = entriesOf(registry).filter((e) => !e.description || e.description.includes('\n')).map((e) => e.code);
        expect(undescribed).toEqual([]);
      });

      it('lists literals only where they are still used', () => {
        for (const literal of registry.literals) {
          for (const file of literal.files) expect(readFileSync(join(ROOT, file), 'utf8'), `${literal.code} in ${file}`).toContain(literal.code);
        }
      });
    });
  }

  it('docs/errors.md is the generated page (node core/scripts/errors-doc.ts) and names every code', () => {
    const page = readFileSync(DOC_FILE, 'utf8');
    for (const registry of REGISTRIES) for (const { code } of entriesOf(registry)) expect(page).toContain(`| \`${code}\` |`);
    expect(page).toBe(renderErrorsDoc());
  });

  it('finds a GH_ literal in code and skips comment lines (the scanner the test relies on)', () => {
    const codes = sourceCodes(['core/src/server']);
    expect(codes.get('GH_UNHANDLED')).toEqual(new Set(['core/src/server/process-guards.ts']));
    expect(sourceCodes(['init-container/src']).has('GH_INIT_')).toBe(false);
  });
});
