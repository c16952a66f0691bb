import { SourceMap, type SourceMapPayload } from 'node:module';

/** A position in the plugin's own sources (1-based, as editors and stacks show them). */
export interface SourcePosition {
  source: string;
  line: number;
  column: number;
}

/** The original position of a 1-based position in the compiled script, or undefined when the map has none. */
export function originalPosition(map: SourceMap, line: number, column: number): SourcePosition | undefined {
  const entry = map.findEntry(line - 1, column - 1) as { originalSource?: string; originalLine?: number; originalColumn?: number };
  if (typeof entry?.originalSource !== 'string' || typeof entry.originalLine !== 'number') return undefined;
  return { source: entry.originalSource, line: entry.originalLine + 1, column: (entry.originalColumn ?? 0) + 1 };
}

function parse(map: string | SourceMapPayload): SourceMap | undefined {
  try {
    return new SourceMap(typeof map === 'string' ? (JSON.parse(map) as SourceMapPayload) : map);
  } catch {
    return undefined;
  }
}

/**
 * Rewrites the positions of `scriptUrl` (the compiled plugin, as its stack frames name it) in a
 * text (a stack, a log line) to the plugin's own file:line:column through its source map. Text
 * without such positions comes back unchanged; so does everything when the map is unusable.
 */
export function stackMapper(map: string | SourceMapPayload, scriptUrl: string): (text: string) => string {
  const parsed = parse(map);
  if (!parsed) return (text) => text;
  const escaped = scriptUrl.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const position = new RegExp(`${escaped}:(\\d+):(\\d+)`, 'g');
  return (text) => {
    if (typeof text !== 'string' || !text.includes(scriptUrl)) return text;
    return text.replace(position, (whole, line: string, column: string) => {
      const original = originalPosition(parsed, Number(line), Number(column));
      return original ? `${original.source}:${original.line}:${original.column}` : whole;
    });
  };
}

/** The first `file:line:column` of a mapped stack: where the plugin failed. */
export function firstFrame(stack: string | undefined): string | undefined {
  const match = stack ? /\(?([^\s()]+:\d+:\d+)\)?\s*$/m.exec(stack.split('\n')[0] ?? '') : null;
  return match?.[1];
}

/** `message (at file:line:column)`: a failure's message with where the plugin failed, when known. */
export function withLocation(message: string, stack: string | undefined): string {
  const at = firstFrame(stack);
  return at ? `${message} (at ${at})` : message;
}
