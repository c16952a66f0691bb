import { LineCounter, parseAllDocuments, isNode, type Document } from 'yaml';
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
    if (doc.contents === null) return;
    const line = doc.contents.range ? lineCounter.linePos(doc.contents.range[0]).line : 1;
    documents.push({
      file,
      index,
      line,
      value: doc.toJS({ maxAliasCount: 100 }),
      lineOf(path) {
        for (let depth = path.length; depth >= 0; depth--) {
          const node = doc.getIn(path.slice(0, depth), true);
          if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
        }
        return line;
      },
    });
  });
  return { documents, diagnostics };
}
