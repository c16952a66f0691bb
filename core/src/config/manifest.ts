import { LineCounter, parseAllDocuments, isMap, isScalar, isSeq, type Document } from 'yaml';
import { ConfigCodes, type Diagnostic, type PathSegment } from './diagnostic.ts';
import { jsonName } from './proto-names.ts';
import type { SchemaVerdict } from './validate.ts';

/** One YAML/JSON document read from a file, with a way back to its source lines. */
export interface ManifestDocument {
  readonly file: string;
  /** Position of the document in its file (0-based). */
  readonly index: number;
  /** First line of the document (1-based). */
  readonly line: number;
  readonly value: unknown;
  /** Line of the deepest existing node on `path` (1-based). */
  lineOf(path: readonly PathSegment[]): number;
  /**
   * Set when the source refused the document's content ({@link resourceLimitProblem}): `value`
   * then holds only its identity, and the resource is rejected with this reason (its last
   * accepted version keeps serving).
   */
  readonly refused?: string;
  /** The schema half of validation when the source computed it already (the parse worker, for large files); its `value` is the document's. */
  readonly verdict?: SchemaVerdict | undefined;
}

/** Limits on one manifest file (documented in docs/configuration.md). */
export const MANIFEST_LIMITS = {
  /** Alias uses per document (YAML "billion laughs"). */
  maxAliases: 100,
  /** Nesting depth of a document's value. */
  maxDepth: 64,
  /** Bytes of one file. */
  maxFileBytes: 8 * 1024 * 1024,
  /** Files at least this large get no field lines in diagnostics (see linesOfText). */
  maxReparseBytes: 256 * 1024,
  /** Entries of one map or list (a 20,000-route virtual host has 20,000; a 400,000-key map was a memory attack). */
  maxEntries: 50_000,
} as const;

/**
 * Parses a manifest file: YAML with any number of `---` documents, or JSON
 * (a JSON file is one YAML document). Empty documents are skipped. Never throws: anything the
 * parser cannot turn into plain, finite, acyclic data is a diagnostic for that document.
 */
export function parseManifests(file: string, text: string): { documents: ManifestDocument[]; diagnostics: Diagnostic[] } {
  const documents: ManifestDocument[] = [];
  const diagnostics: Diagnostic[] = [];
  const fail = (line: number, message: string, code: string = ConfigCodes.PARSE): void => {
    diagnostics.push({ code, severity: 'error', file, line, message });
  };
  if (text.length > MANIFEST_LIMITS.maxFileBytes) {
    fail(1, `the file is larger than ${MANIFEST_LIMITS.maxFileBytes} bytes`, ConfigCodes.LIMITS);
    return { documents, diagnostics };
  }
  const lineCounter = new LineCounter();
  let docs: Document[];
  try {
    // uniqueKeys is checked below in one linear pass: the library's own check is quadratic
    // (a 40,000-key map stalled a reload for 31 s).
    const parsed = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: false });
    docs = Array.isArray(parsed) ? parsed : [parsed as unknown as Document];
  } catch (error) {
    fail(1, `cannot parse: ${(error as Error).message}`);
    return { documents, diagnostics };
  }
  docs.forEach((doc, index) => {
    if (doc.errors.length > 0) {
      for (const error of doc.errors) fail(lineCounter.linePos(error.pos[0]).line, error.message.split('\n')[0]!);
      return;
    }
    const duplicate = firstDuplicateKey(doc.contents);
    if (duplicate) {
      fail(duplicate.offset === undefined ? 1 : lineCounter.linePos(duplicate.offset).line, `Map keys must be unique ("${duplicate.key}" appears twice)`);
      return;
    }
    const start = doc.contents?.range ? lineCounter.linePos(doc.contents.range[0]).line : 1;
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: MANIFEST_LIMITS.maxAliases });
    } catch (error) {
      const message = (error as Error).message;
      fail(start, /alias/i.test(message) ? `too many YAML alias uses (more than ${MANIFEST_LIMITS.maxAliases}): ${message}` : `cannot read the document: ${message}`, ConfigCodes.LIMITS);
      return;
    }
    const shape = checkShape(value);
    if (shape) {
      fail(start, shape, ConfigCodes.LIMITS);
      return;
    }
    // `---` followed by nothing (or only comments) is an empty document, not a resource.
    if (value === null || value === undefined || doc.contents === null) return;
    documents.push({
      file,
      index,
      line: start,
      value,
      lineOf(path) {
        return lineOfPath(doc.contents, path, start, (offset) => lineCounter.linePos(offset).line);
      },
    });
  });
  return { documents, diagnostics };
}

/**
 * `lineOf` for documents kept without their syntax tree (which costs far more memory than the
 * values): the first call parses `text` again, once for every document of the file, and the
 * tree is dropped when the current task ends. A load asks for the lines of all its diagnostics in
 * one synchronous pass, so a file with many rejected documents is parsed again once, not once
 * per document (500 rejected RouteTables in one file re-parsed it 500 times: 45 s).
 */
export function linesOfText(file: string, text: string): (index: number, path: readonly PathSegment[], fallback: number) => number {
  // A large file is parsed off the event loop (./source/parse-off-thread.ts); parsing it again here
  // would stall traffic for seconds: its diagnostics give the document's first line (and the path).
  if (text.length >= MANIFEST_LIMITS.maxReparseBytes) return (_index, _path, fallback) => fallback;
  let byIndex: Map<number, ManifestDocument> | undefined;
  // Lines already found, kept (small numbers): every reload asks for the same diagnostics again,
  // and re-parsing a 600 KB file of rejected resources on each one stalled reloads for ~0.5 s.
  const found = new Map<string, number>();
  return (index, path, fallback) => {
    const key = `${index}\0${path.join('\0')}`;
    let line = found.get(key);
    if (line !== undefined) return line;
    if (!byIndex) {
      byIndex = new Map(parseManifests(file, text).documents.map((d) => [d.index, d]));
      queueMicrotask(() => (byIndex = undefined));
    }
    line = byIndex.get(index)?.lineOf(path) ?? fallback;
    found.set(key, line);
    return line;
  };
}

/** The first key that appears twice in one map, anywhere in the document (linear: one Set per map). */
function firstDuplicateKey(root: unknown): { key: string; offset: number | undefined } | undefined {
  const stack: unknown[] = [root];
  const seenNodes = new Set<unknown>();
  while (stack.length > 0) {
    const node = stack.pop();
    if (!node || typeof node !== 'object' || seenNodes.has(node)) continue;
    seenNodes.add(node);
    if (isMap(node)) {
      const keys = new Set<unknown>();
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? pair.key.value : pair.key;
        if (keys.has(key)) {
          const offset = isScalar(pair.key) && pair.key.range ? pair.key.range[0] : undefined;
          return { key: String(key).slice(0, 80), offset };
        }
        keys.add(key);
        stack.push(pair.value);
      }
    } else if (isSeq(node)) {
      for (const item of node.items) stack.push(item);
    }
  }
  return undefined;
}

/**
 * Why a resource from any source (a document of a file, an object from the Kubernetes API)
 * cannot be configuration, or undefined: larger than a file may be, nested deeper than a
 * document may be, a map or list with more entries than one may have, or containing itself. One place, so every source refuses the same shapes
 * (a 200-deep `pluginAuth.config` was refused in a file and accepted from the API server).
 */
export function resourceLimitProblem(value: unknown, bytes: () => number): string | undefined {
  // The shape first: measuring a value nested thousands deep would overflow the stack.
  const shape = checkShape(value);
  if (shape) return shape;
  const size = bytes();
  return size > MANIFEST_LIMITS.maxFileBytes ? `the resource is ${size} bytes, more than the ${MANIFEST_LIMITS.maxFileBytes} a manifest may have` : undefined;
}

/**
 * Why a parsed value cannot be configuration, or undefined when it can: a self-referencing
 * anchor (`&c {self: *c}`) made an object that contains itself, and every later walk over it
 * (fingerprint, freeze, validation) recursed forever.
 */
export function checkShape(value: unknown): string | undefined {
  const ancestors = new Set<object>();
  const visit = (node: unknown, depth: number): string | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    if (depth > MANIFEST_LIMITS.maxDepth) return `the document is nested deeper than ${MANIFEST_LIMITS.maxDepth} levels`;
    if (ancestors.has(node)) return 'the document refers to itself (a YAML anchor used inside its own value)';
    const children = Array.isArray(node) ? node : Object.values(node);
    if (children.length > MANIFEST_LIMITS.maxEntries) return `a ${Array.isArray(node) ? 'list' : 'map'} in the document has ${children.length} entries, more than ${MANIFEST_LIMITS.maxEntries}`;
    ancestors.add(node);
    for (const child of children) {
      const problem = visit(child, depth + 1);
      if (problem) return problem;
    }
    ancestors.delete(node);
    return undefined;
  };
  return visit(value, 0);
}

/**
 * Line of the deepest node on `path` that exists: for a map entry, the line of its key
 * (where a user looks for `foo:`), for a list item the line of the item.
 */
function lineOfPath(root: unknown, path: readonly PathSegment[], fallback: number, lineAt: (offset: number) => number): number {
  let node = root;
  let line = fallback;
  for (const segment of path) {
    if (isMap(node)) {
      // A field given by its proto name (`prefix_rewrite`) is validated by its JSON name (./proto-names.ts).
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === segment) ?? node.items.find((p) => typeof segment === 'string' && isScalar(p.key) && typeof p.key.value === 'string' && p.key.value.includes('_') && jsonName(p.key.value) === segment);
      if (!pair) break;
      if (isScalar(pair.key) && pair.key.range) line = lineAt(pair.key.range[0]);
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      const item = node.items[segment] as { range?: [number, number, number] } | undefined;
      if (!item) break;
      if (item.range) line = lineAt(item.range[0]);
      node = item;
    } else break;
  }
  return line;
}
