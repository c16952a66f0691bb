import { describe, expect, test } from 'vitest';
import { linesOfText, MANIFEST_LIMITS, parseManifests, resourceLimitProblem } from './manifest.ts';

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

describe('resourceLimitProblem: the limits every source applies (issue 24 finding 13)', () => {
  const nested = (depth: number) => {
    let value: object = { leaf: 1 };
    for (let i = 0; i < depth; i++) value = { a: value };
    return value;
  };

  test('depth, entries and size, with a message naming the limit; within them, nothing', () => {
    expect(resourceLimitProblem(nested(60), () => 10)).toBeUndefined();
    expect(resourceLimitProblem(nested(200), () => 10)).toBe('the document is nested deeper than 64 levels');
    const wide = Object.fromEntries(Array.from({ length: 50_001 }, (_, i) => [`k${i}`, i]));
    expect(resourceLimitProblem({ spec: { config: wide } }, () => 10)).toBe('a map in the document has 50001 entries, more than 50000');
    expect(resourceLimitProblem({ routes: new Array(50_001).fill(0) }, () => 10)).toBe('a list in the document has 50001 entries, more than 50000');
    expect(resourceLimitProblem({ routes: new Array(20_000).fill({ prefix: '/' }) }, () => 10)).toBeUndefined();
    expect(resourceLimitProblem({ a: 1 }, () => 9 * 1024 * 1024)).toBe('the resource is 9437184 bytes, more than the 8388608 a manifest may have');
  });

  test('a value nested too deep to measure is refused before it is measured', () => {
    let measured = false;
    expect(resourceLimitProblem(nested(100_000), () => ((measured = true), 0))).toContain('nested deeper than 64');
    expect(measured).toBe(false);
  });

  test('files: a document with too many entries is a file diagnostic, as from the API server', () => {
    const text = JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'wide' }, stringData: Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, 'v'])) });
    const { documents, diagnostics } = parseManifests('wide.json', text);
    expect(documents).toEqual([]);
    expect(diagnostics).toEqual([expect.objectContaining({ code: 'GH_CONFIG_LIMITS', file: 'wide.json', message: 'a map in the document has 60000 entries, more than 50000' })]);
  });
});

describe('linesOfText: lines for diagnostics of documents kept without their syntax tree', () => {
  const doc = (name: string) => `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\nstringData:\n  key: value\n`;

  test('a small file: the line of the field, each asked line remembered', () => {
    const lines = linesOfText('a.yaml', [doc('a'), doc('b')].join('---\n'));
    expect(lines(1, ['stringData', 'key'], 8)).toBe(13);
    expect(lines(0, ['metadata', 'name'], 1)).toBe(4);
  });

  test('a file parsed off the event loop is not parsed again on it: the document line is given', () => {
    const big = doc('a') + `# ${'x'.repeat(MANIFEST_LIMITS.maxReparseBytes)}\n`;
    // Line 6 holds the field; without a second parse the answer is the document's first line.
    expect(linesOfText('big.yaml', big)(0, ['stringData', 'key'], 1)).toBe(1);
  });
});
