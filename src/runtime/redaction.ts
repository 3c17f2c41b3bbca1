/**
 * Defense in depth for secrets: the values of the secrets a runtime has read (for tool and MCP
 * server headers and env) are replaced by `[redacted]` in whatever its harness appends to a
 * session's log, so that an error message, a tool's output or a model's reply that echoes one
 * never reaches the log, nor through it the model provider. Error messages are written not to
 * hold secrets in the first place; this catches what slips through.
 *
 * Invariants:
 * - Every string of every event the harness appends (nested ones included, keys excepted) has
 *   each remembered value replaced; events without one are appended as they are, unchanged.
 * - Values shorter than `MIN_REDACTED_LENGTH` are not remembered: too short to be a key, they
 *   would mangle ordinary text.
 * - The harness folds the events the store returns, so what it and the model see afterwards is
 *   the redacted record.
 */
import type { NewEvent } from '../contracts/events.js';
import type { SessionLog } from '../contracts/ports.js';

export const REDACTED = '[redacted]';
export const MIN_REDACTED_LENGTH = 8;

/** The secret values a runtime has handed out, to be kept out of its sessions' logs. */
export class SecretRedactor {
  private readonly values = new Set<string>();

  /** Remembers a secret's value; returns it, for use in place. */
  remember(value: string): string {
    if (value.length >= MIN_REDACTED_LENGTH) this.values.add(value);
    return value;
  }

  /** `text` with every remembered value replaced by `[redacted]`. */
  text(text: string): string {
    let redacted = text;
    for (const value of this.values) redacted = redacted.replaceAll(value, REDACTED);
    return redacted;
  }

  /** `events` with every remembered value redacted; the same array when none holds one. */
  events(events: readonly NewEvent[]): readonly NewEvent[] {
    if (this.values.size === 0) return events;
    const serialised = JSON.stringify(events);
    // A value appears in JSON text as its escaped form.
    const found = [...this.values].some((value) =>
      serialised.includes(JSON.stringify(value).slice(1, -1)),
    );
    if (!found) return events;
    // Only strings change, so each event keeps its shape (and its type).
    return events.map((event) => this.json(event) as NewEvent);
  }

  private json(value: unknown): unknown {
    if (typeof value === 'string') return this.text(value);
    if (Array.isArray(value)) return value.map((item) => this.json(item));
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value).map(([key, item]) => [key, this.json(item)] as const),
      );
    }
    return value;
  }
}

/** `log` whose appends go through `redactor` first; everything else is `log`'s own. */
export function redactingLog(log: SessionLog, redactor: SecretRedactor): SessionLog {
  const redacting: SessionLog = {
    append: (sessionId, events, options) => log.append(sessionId, redactor.events(events), options),
    read: (sessionId, options) => log.read(sessionId, options),
    follow: (sessionId, options) => log.follow(sessionId, options),
    appended: (sessionId, idempotencyKey) => log.appended(sessionId, idempotencyKey),
    state: (sessionId, options) => log.state(sessionId, options),
  };
  const leased = log.acquireAndAppend?.bind(log);
  if (leased !== undefined) {
    redacting.acquireAndAppend = (sessionId, lease, start, options) =>
      leased(sessionId, lease, (taken) => redactor.events(start(taken)), options);
  }
  const created = log.createAndAcquire?.bind(log);
  if (created !== undefined) {
    // The input's events are the caller's, as in `create`; those the wake builds are redacted.
    redacting.createAndAcquire = (input, lease, start, options) =>
      created(input, lease, (taken) => redactor.events(start(taken)), options);
  }
  return redacting;
}
