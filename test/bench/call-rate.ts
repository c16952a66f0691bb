/**
 * Calls `call` back to back from `concurrency` loops for `durationMs`, after a 500 ms
 * warm-up: calls per second, and the mean time of one call (µs) at that concurrency.
 */
export async function callRate(call: () => Promise<unknown>, concurrency: number, durationMs: number): Promise<{ perSec: number; meanUs: number }> {
  const run = async (ms: number) => {
    let done = 0;
    const until = performance.now() + ms;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < until) {
          await call();
          done++;
        }
      }),
    );
    return done;
  };
  await run(500);
  const started = performance.now();
  const done = await run(durationMs);
  const elapsed = performance.now() - started;
  return { perSec: (done / elapsed) * 1000, meanUs: (elapsed * 1000 * concurrency) / done };
}
