/**
 * Runs in a worker thread (see ./otlp-http-exporter.ts): POSTs encoded OTLP batches to the
 * collector over undici. The gateway's event loop proxies its requests over undici too; sending
 * the spans from there made its hot request code serve a second kind of request once a second,
 * which cost a young process several per cent of its throughput (docs/tracing.md "Cost"). Here
 * the send has its own isolate, so it shares no code and no type feedback with the proxy.
 */
import { parentPort } from 'node:worker_threads';
import { Agent, request } from 'undici';

/** One batch to send. */
export interface SendRequest {
  readonly id: number;
  readonly url: string;
  readonly body: Uint8Array;
  readonly timeoutMs: number;
}

/** How it went: `error` says why it failed (a status other than 2xx included). */
export interface SendReply {
  readonly id: number;
  readonly error?: string;
}

const agent = new Agent({ connections: 2, keepAliveTimeout: 30_000 });

async function send({ url, body, timeoutMs }: SendRequest): Promise<string | undefined> {
  try {
    const response = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf' },
      body,
      dispatcher: agent,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    // The collector's answer body (an ExportTraceServiceResponse) is not needed.
    await response.body.dump().catch(() => undefined);
    return response.statusCode >= 200 && response.statusCode < 300 ? undefined : `the collector answered ${response.statusCode}`;
  } catch (error) {
    return (error as Error).message || String(error);
  }
}

parentPort!.on('message', (message: SendRequest | 'close') => {
  if (message === 'close') {
    void agent.close().catch(() => undefined).finally(() => parentPort!.close());
    return;
  }
  void send(message).then((error) => parentPort!.postMessage((error === undefined ? { id: message.id } : { id: message.id, error }) satisfies SendReply));
});
