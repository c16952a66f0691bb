/**
 * Runs in a worker thread (see ./parse-off-thread.ts): parses manifest text into plain values,
 * so a large file's YAML parse (1.3 s for 20,000 routes) never blocks the event loop.
 */
import { parentPort } from 'node:worker_threads';
import { parseManifests } from '../manifest.ts';

parentPort!.on('message', ({ id, file, text }: { id: number; file: string; text: string }) => {
  try {
    const { documents, diagnostics } = parseManifests(file, text);
    parentPort!.postMessage({ id, documents: documents.map((d) => ({ index: d.index, line: d.line, value: d.value })), diagnostics });
  } catch (error) {
    parentPort!.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
