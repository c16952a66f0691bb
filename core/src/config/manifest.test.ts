import { describe, expect, test } from 'vitest';
import { parseManifests } from './manifest.ts';

describe('parseManifests', () => {
  test('reads every YAML document, skipping empty ones, with first lines', () => {
    const { documents, diagnostics } = parseManifests('a.yaml', '---\nkind: A\n---\n---\n# only a comment\n---\nkind: B\nx:\n  y: [1, 2]\n');
    expect(diagnostics).toEqual([]);
    expect(documents.map((d) => [d.value, d.line, d.index])).toEqual([
      [{ kind: 'A' }, 2, 0],
      [{ kind: 'B', x: { y: [1, 2] } }, 7, 3],
    ]);
    expect(documents[1]!.lineOf(['x', 'y', 1])).toBe(9);
    expect(documents[1]!.lineOf(['x'])).toBe(8);
    // A path that does not exist points at its deepest existing parent.
    expect(documents[1]!.lineOf(['x', 'missing', 'deeper'])).toBe(8);
  });

  test('reads JSON files as one document', () => {
    const { documents } = parseManifests('a.json', '{\n  "kind": "Upstream",\n  "spec": {"static": {}}\n}\n');
    expect(documents).toHaveLength(1);
    expect(documents[0]!.value).toEqual({ kind: 'Upstream', spec: { static: {} } });
    expect(documents[0]!.lineOf(['spec', 'static'])).toBe(3);
  });

  test('syntax errors and duplicate keys are file diagnostics with a line', () => {
    const { documents, diagnostics } = parseManifests('bad.yaml', 'kind: A\n---\nkind: B\nkind: C\n---\nkind: [unclosed\n');
    expect(documents.map((d) => d.value)).toEqual([{ kind: 'A' }]);
    expect(diagnostics.map((d) => [d.code, d.file, d.line])).toEqual([
      ['GH_CONFIG_PARSE', 'bad.yaml', 4],
      ['GH_CONFIG_PARSE', 'bad.yaml', expect.any(Number)],
    ]);
  });
});
