import WebSocket from 'ws';
import { WRK_SETTINGS, type WrkResult } from './wrk.ts';

/** WebSocket load: connections, each with this many messages in flight (an echo per message). */
export const WS_SETTINGS = { connections: 8, inFlight: 16, messageBytes: 64 };

/**
 * Echo round trips over WebSocket: every connection keeps `inFlight` messages outstanding and
 * sends the next as each echo comes back. Reports messages/s as `requestsPerSec` and the
 * round-trip percentiles, over the bench duration after its warm-up.
 */
export async function runWsLoad(url: string, headers: Record<string, string> = {}): Promise<WrkResult> {
  const payload = Buffer.alloc(WS_SETTINGS.messageBytes, 0x61);
  const sockets = await Promise.all(
    Array.from({ length: WS_SETTINGS.connections }, () => {
      const ws = new WebSocket(url, { headers, perMessageDeflate: false });
      return new Promise<WebSocket>((resolve, reject) => {
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
        ws.once('unexpected-response', (_req, res) => reject(new Error(`WebSocket handshake answered ${res.statusCode}`)));
      });
    }),
  );
  let measuring = false;
  let stopped = false;
  let count = 0;
  let errors = 0;
  const samples: number[] = [];
  for (const ws of sockets) {
    const sent: number[] = [];
    const send = () => {
      sent.push(performance.now());
      ws.send(payload);
    };
    ws.on('message', () => {
      const rtt = performance.now() - sent.shift()!;
      if (measuring) {
        count++;
        if (count % 16 === 0) samples.push(rtt);
      }
      if (!stopped) send();
    });
    ws.on('error', () => errors++);
    ws.on('close', (code) => {
      if (!stopped) errors++;
      void code;
    });
    for (let i = 0; i < WS_SETTINGS.inFlight; i++) send();
  }
  await new Promise((r) => setTimeout(r, WRK_SETTINGS.warmupS * 1000));
  measuring = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, WRK_SETTINGS.durationS * 1000));
  const seconds = (performance.now() - started) / 1000;
  measuring = false;
  stopped = true;
  const total = count;
  await Promise.all(sockets.map((ws) => new Promise((r) => (ws.once('close', r), ws.close(1000)))));
  samples.sort((a, b) => a - b);
  const pct = (p: number) => (samples.length ? samples[Math.min(samples.length - 1, Math.floor((samples.length * p) / 100))]! : NaN);
  return { requestsPerSec: total / seconds, p50Ms: pct(50), p99Ms: pct(99), requests: total, errors };
}
