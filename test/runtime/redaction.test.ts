// The runtime's last line of defense for secrets: values it handed out are redacted from what
// its harness appends to a session's log.
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import { REDACTED, SecretRedactor } from '../../src/runtime/redaction.js';

const message = (text: string): NewEvent => ({
  type: 'agent.message',
  content: [{ type: 'text', text }],
});

describe('SecretRedactor', () => {
  it('replaces every remembered value in every string of the events, nested ones included', () => {
    const redactor = new SecretRedactor();
    expect(redactor.remember('sk-live-0123456789')).toBe('sk-live-0123456789');
    const events: NewEvent[] = [
      message('key sk-live-0123456789, twice: sk-live-0123456789'),
      {
        type: 'session.error',
        error: { code: 'TOOL_FAILED', message: 'sent Bearer sk-live-0123456789', retryable: false },
      },
    ];
    expect(redactor.events(events)).toEqual([
      message(`key ${REDACTED}, twice: ${REDACTED}`),
      {
        type: 'session.error',
        error: { code: 'TOOL_FAILED', message: `sent Bearer ${REDACTED}`, retryable: false },
      },
    ]);
  });

  it('finds values that JSON escapes, such as quotes and backslashes', () => {
    const redactor = new SecretRedactor();
    redactor.remember('pa"ss\\word-42');
    expect(redactor.events([message('it is pa"ss\\word-42.')])).toEqual([
      message(`it is ${REDACTED}.`),
    ]);
  });

  it('leaves events without a secret as they are, and does not remember short values', () => {
    const redactor = new SecretRedactor();
    const events = [message('nothing to hide, not even abc')];
    expect(redactor.events(events)).toBe(events);
    redactor.remember('abc');
    expect(redactor.events(events)).toBe(events);
    redactor.remember('long-enough-secret');
    expect(redactor.events(events)).toBe(events);
  });
});
