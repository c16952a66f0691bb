/**
 * Results of host work that finished off the isolate (verifies on the thread pool, store
 * operations on Redis or the primary, fetches, timers), handed to the isolate in one crossing
 * per turn of the event loop: every result that arrives in the same turn goes in together.
 */
export class IsolateInbox {
  /** Operations started and not yet finished (for the per-isolate bound). */
  running = 0;
  private pending: unknown[] = [];
  private flushing = false;
  private readonly deliver: (results: unknown[]) => void;

  /** `deliver`: crosses into the isolate with the results of the turn (entries of every finished operation, in order). */
  constructor(deliver: (results: unknown[]) => void) {
    this.deliver = deliver;
  }

  /** One operation started; `finish` it with its result entries (or with none when it is dropped). */
  start(): { finish(...entries: unknown[]): void } {
    this.running++;
    let done = false;
    return {
      finish: (...entries) => {
        if (done) return;
        done = true;
        this.running--;
        if (entries.length === 0) return;
        this.pending.push(...entries);
        if (this.flushing) return;
        this.flushing = true;
        setImmediate(() => this.flush());
      },
    };
  }

  private flush(): void {
    this.flushing = false;
    const results = this.pending;
    this.pending = [];
    if (results.length > 0) this.deliver(results);
  }
}
