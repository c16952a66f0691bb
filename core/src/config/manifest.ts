import { LineCounter, parseAllDocuments, isMap, isScalar, isSeq, type Document } from 'yaml';
import { ConfigCodes, type Diagnostic, type PathSegment } from './diagnostic.ts';

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
}

/**
 * Parses a manifest file: YAML with any number of `---` documents, or JSON
 * (a JSON file is one YAML document). Empty documents are skipped.
 */
export function parseManifests(file: string, text: string): { documents: ManifestDocument[]; diagnostics: Diagnostic[] } {
  const lineCounter = new LineCounter();
  const parsed = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const docs: Document[] = Array.isArray(parsed) ? parsed : [parsed as unknown as Document];
  const documents: ManifestDocument[] = [];
  const diagnostics: Diagnostic[] = [];
  docs.forEach((doc, index) => {
    if (doc.errors.length > 0) {
      for (const error of doc.errors) {
        diagnostics.push({
          code: ConfigCodes.PARSE,
          severity: 'error',
          file,
          line: lineCounter.linePos(error.pos[0]).line,
          message: error.message.split('\n')[0]!,
        });
      }
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    // `---` followed by nothing (or only comments) is an empty document, not a resource.
    if (value === null || value === undefined || doc.contents === null) return;
    const line = doc.contents.range ? lineCounter.linePos(doc.contents.range[0]).line : 1;
    documents.push({
      file,
      index,
      line,
      value,
      lineOf(path) {
        return lineOfPath(doc.contents, path, line, (offset) => lineCounter.linePos(offset).line);
      },
    });
  });
  return { documents, diagnostics };
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
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === segment);
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
