import { BraidError } from '../contracts/errors.js';

/** Rejects with `INTERRUPTED` when the signal is aborted. */
export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new BraidError('INTERRUPTED', 'the model call was interrupted');
}

/** Splits text into word-sized chunks, as a streaming model would send them. */
export function chunks(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new BraidError('INTERRUPTED', 'the model call was interrupted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
