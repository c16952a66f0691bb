/** What a store operation failed with, as the isolate rethrows it (`TypeError`, `RangeError` or `StoreUnavailableError`). */
export class StoreOpError extends Error {
  constructor(name: 'TypeError' | 'RangeError' | 'StoreUnavailableError', message: string) {
    super(message);
    this.name = name;
  }
}
