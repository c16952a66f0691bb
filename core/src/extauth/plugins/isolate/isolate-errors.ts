/**
 * What isolated-vm's errors mean. isolated-vm reports a broken limit only in the error's text,
 * so this is the one place that reads it (issue 26: it was read in two places).
 */
export type IsolateFailure = 'memory' | 'cpu';

/** `memory` when the isolate hit its heap limit, `cpu` when a call ran past its CPU timeout, else undefined. */
export function isolateFailure(message: string): IsolateFailure | undefined {
  if (message.includes('memory limit')) return 'memory';
  if (message.includes('Script execution timed out')) return 'cpu';
  return undefined;
}
