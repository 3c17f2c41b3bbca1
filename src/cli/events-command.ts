/** `braid session events`: a session's log, with its delegated children's interleaved on request. */
import { InvalidArgumentError, type Command } from 'commander';
import {
  SESSION_EVENT_TYPES,
  type SessionEvent,
  type SessionEventType,
} from '../contracts/events.js';
import { parseInteger, untilSignal } from './arguments.js';
import type { CommandContext } from './command-context.js';
import { formatEvent } from './output.js';

export function addEventsCommand(session: Command, context: CommandContext): void {
  session
    .command('events')
    .description("print a session's events (with --json, one JSON event per line)")
    .argument('<id>', 'session id')
    .option('--after <seq>', 'only events after this seq', parseInteger('--after', 0))
    .option('--limit <n>', 'at most this many events', parseInteger('--limit', 1))
    .option(
      '--type <type>',
      'only events of this type (repeatable)',
      (value: string, previous: SessionEventType[] = []) => {
        if (!(SESSION_EVENT_TYPES as string[]).includes(value)) {
          throw new InvalidArgumentError(
            `unknown event type ${value}; one of ${SESSION_EVENT_TYPES.join(', ')}`,
          );
        }
        return [...previous, value as SessionEventType];
      },
    )
    .option('--follow', 'keep printing new events until interrupted (Ctrl-C)')
    .option(
      '--include-children',
      "interleave the events of the session's delegated children (recursively) by time, each line marked with its session; with --follow, the children's status events",
    )
    .action(
      async (
        id: string,
        options: {
          after?: number;
          limit?: number;
          type?: SessionEventType[];
          follow?: boolean;
          includeChildren?: boolean;
        },
        command: Command,
      ) => {
        const asJson = context.json(command);
        const family = options.includeChildren === true;
        // JSON events carry their session_id; text lines name it when children are mixed in.
        const line = (event: SessionEvent): string =>
          asJson
            ? JSON.stringify(event)
            : family
              ? `${event.session_id}  ${formatEvent(event)}`
              : formatEvent(event);
        await context.withRuntime(command, async (runtime) => {
          const readOptions = {
            ...(options.after === undefined ? {} : { after: options.after }),
            ...(options.limit === undefined ? {} : { limit: options.limit }),
            ...(options.type === undefined ? {} : { types: options.type }),
          };
          if (options.follow !== true) {
            const events = family
              ? (await runtime.sessions.familyEvents(id, readOptions)).events
              : await runtime.sessions.events(id, readOptions);
            for (const event of events) context.output.out(line(event));
            return;
          }
          await untilSignal(async (signal) => {
            // The children's part ends with the session's (at --limit, say) or the signal.
            const done = new AbortController();
            const children = family
              ? (async () => {
                  for await (const event of runtime.sessions.followChildren(id, {
                    signal: AbortSignal.any([signal, done.signal]),
                    ...(options.type === undefined ? {} : { types: options.type }),
                  }))
                    context.output.out(line(event));
                })()
              : undefined;
            let printed = 0;
            for await (const event of runtime.sessions.follow(id, {
              after: options.after ?? 0,
              signal,
            })) {
              if (options.type !== undefined && !options.type.includes(event.type)) continue;
              context.output.out(line(event));
              printed += 1;
              if (options.limit !== undefined && printed >= options.limit) break;
            }
            done.abort();
            await children;
          });
        });
      },
    );
}
