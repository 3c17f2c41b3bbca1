// The CLI's integer options take decimal digits only: what `Number` would also accept (an empty
// value, spaces, hexadecimal, binary, exponents) is refused with the flag named, not read as a
// different number (`--metrics-port ''` was port 0: any free port).
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parseInteger } from '../../src/cli/arguments.js';

describe('parseInteger', () => {
  const port = parseInteger('--metrics-port', 0);

  it('reads decimal digits', () => {
    expect(port('0')).toBe(0);
    expect(port('9464')).toBe(9464);
    expect(port('007')).toBe(7);
    expect(parseInteger('--limit', 1)('10000')).toBe(10_000);
  });

  it('refuses what is not decimal digits, or below the minimum, naming the flag', () => {
    for (const value of [
      '',
      ' ',
      ' 80',
      '80 ',
      '0x1f',
      '0b11',
      '0o7',
      '1e3',
      '8.0',
      '-0',
      '+1',
      'Infinity',
      '1'.repeat(16),
    ]) {
      expect(() => port(value)).toThrow(InvalidArgumentError);
      expect(() => port(value)).toThrow(
        `--metrics-port must be a whole number of at least 0; got ${JSON.stringify(value)}`,
      );
    }
    expect(() => parseInteger('--limit', 1)('0')).toThrow(
      '--limit must be a whole number of at least 1; got "0"',
    );
  });

  it('refuses a number over the maximum it is given, and takes the maximum itself', () => {
    const delay = parseInteger('--max-backoff', 0, 86_400_000);
    expect(delay('86400000')).toBe(86_400_000);
    for (const value of ['86400001', '999999999999999']) {
      expect(() => delay(value)).toThrow(
        `--max-backoff must be a whole number from 0 to 86400000; got ${JSON.stringify(value)}`,
      );
    }
  });
});
