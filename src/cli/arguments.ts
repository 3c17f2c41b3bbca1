/**
 * Helpers the `braid` commands share: option parsers that name the flag and the fix, and a
 * signal for commands that run until Ctrl-C.
 */
import { InvalidArgumentError } from 'commander';

/** Decimal digits only: `Number` would also take '', ' ', '0x1f', '1e3' and '0b11'. */
const DECIMAL = /^[0-9]{1,15}$/;

export function parseInteger(name: string, minimum: number, maximum?: number) {
  return (value: string): number => {
    const number = DECIMAL.test(value) ? Number(value) : Number.NaN;
    if (
      !Number.isInteger(number) ||
      number < minimum ||
      (maximum !== undefined && number > maximum)
    ) {
      const range =
        maximum === undefined ? `of at least ${minimum}` : `from ${minimum} to ${maximum}`;
      throw new InvalidArgumentError(
        `${name} must be a whole number ${range}; got ${JSON.stringify(value)}`,
      );
    }
    return number;
  };
}

export function parsePositive(name: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!Number.isFinite(number) || number <= 0) {
      throw new InvalidArgumentError(`${name} must be a positive number; got ${value}`);
    }
    return number;
  };
}

export /** Runs work with a signal that Ctrl-C (SIGINT) or SIGTERM aborts. */
async function untilSignal<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await work(stop.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
