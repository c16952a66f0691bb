import { Worker } from 'node:worker_threads';
import type { Diagnostic } from '../diagnostic.ts';
import type { SchemaProblem } from '../validate.ts';
import { linesOfText, MANIFEST_LIMITS, parseManifests, type ManifestDocument } from '../manifest.ts';

/** Files at least this large are parsed on the worker thread; smaller ones cost less than the hop. */
export const OFF_THREAD_BYTES = MANIFEST_LIMITS.maxReparseBytes;

interface Reply {
  id: number;
  /** The parsed documents and diagnostics, as JSON text. */
  json?: string;
  documents?: { index: number; line: number; value: unknown; refused?: string; problems?: SchemaProblem[]; version?: string }[];
  diagnostics?: Diagnostic[];
  error?: string;
}

let worker: Worker | undefined;
let nextId = 0;
const waiting = new Map<number, (reply: Reply) => void>();

/** The parse worker, started on first use; it never keeps the process alive on its own. */
function parser(): Worker {
  if (worker) return worker;
  // The sources run as .ts (development, tests), the build as .js next to this file.
  const extension = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  const started = new Worker(new URL(`./parse-worker${extension}`, import.meta.url));
  started.unref();
  started.on('message', (reply: Reply) => {
    waiting.get(reply.id)?.(reply);
    waiting.delete(reply.id);
  });
  const fail = (message: string) => {
    for (const [id, resolve] of waiting) resolve({ id, error: message });
    waiting.clear();
    if (worker === started) worker = undefined;
  };
  started.on('error', (error) => fail(`the parse worker failed: ${error.message}`));
  started.on('exit', (code) => fail(`the parse worker exited (${code})`));
  worker = started;
  return started;
}

/**
 * {@link parseManifests}, on a worker thread for large files (issue 17 finding 15: a
 * 20,000-route reload blocked the event loop ~1.9 s, 1.3 s of it the YAML parse). Documents
 * come back as plain values; `lineOf`, needed only for diagnostics, parses the file again on this
 * thread when it is asked ({@link linesOfText}). Small files, and any failure of the worker, parse here.
 */
export async function parseManifestsOffThread(file: string, text: string): Promise<{ documents: ManifestDocument[]; diagnostics: Diagnostic[] }> {
  if (text.length < OFF_THREAD_BYTES) return parseManifests(file, text);
  const id = ++nextId;
  const thread = parser();
  // Held only while a parse is pending: a one-shot command (validate) must wait for it.
  if (waiting.size === 0) thread.ref();
  const reply = await new Promise<Reply>((resolve) => {
    waiting.set(id, resolve);
    thread.postMessage({ id, file, text });
  });
  if (waiting.size === 0) thread.unref();
  if (reply.json !== undefined) Object.assign(reply, JSON.parse(reply.json) as Pick<Reply, 'documents' | 'diagnostics'>);
  if (reply.error !== undefined || !reply.documents) return parseManifests(file, text);
  const lines = linesOfText(file, text);
  const documents = reply.documents.map(
    (d): ManifestDocument => ({
      file,
      index: d.index,
      line: d.line,
      value: d.value,
      lineOf: (path) => lines(d.index, path, d.line),
      ...(d.refused !== undefined ? { refused: d.refused } : {}),
      // Validated on the worker: the event loop keeps only the checks that need gateway settings.
      ...(d.problems ? { verdict: { value: d.value as Record<string, unknown>, problems: d.problems, version: d.version } } : {}),
    }),
  );
  return { documents, diagnostics: reply.diagnostics ?? [] };
}
