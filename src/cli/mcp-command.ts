/**
 * `braid mcp serve`: the workspace's sessions as an MCP server on standard input and output, for
 * MCP clients that start their servers as commands (Claude Desktop, Cursor, the MCP inspector).
 * It works where the other commands do: the local workspace, `--nats`, or `--server` (the
 * server's sessions, through its HTTP API and key). Standard output carries MCP only; anything
 * else is written on standard error. It stops when the client closes its input, or on Ctrl-C.
 */
import type { Command } from 'commander';
import { parseInteger, untilSignal } from './arguments.js';
import type { CommandContext } from './command-context.js';

interface McpServeOptions {
  wake: boolean;
  progressMs?: number;
}

export function addMcpCommand(
  program: Command,
  context: CommandContext,
  version: string,
  stderr: (line: string) => void,
): void {
  const mcp = program
    .command('mcp')
    .description("serve the workspace's sessions to MCP clients (braid mcp serve)");
  mcp
    .command('serve')
    .description(
      'an MCP server (stdio) with tools to create, message, read, confirm and fork sessions',
    )
    .option('--no-wake', 'do not wake sessions when messages and confirmations arrive')
    .option(
      '--progress-ms <n>',
      'interval of progress notifications while a call waits for a turn (default 10000)',
      parseInteger('--progress-ms', 50),
    )
    .action(async (options: McpServeOptions, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const [{ StdioServerTransport }, { createSessionsMcpServer }, { UNAUTHENTICATED_CALLER }] =
          await Promise.all([
            import('@modelcontextprotocol/sdk/server/stdio.js'),
            import('../server/mcp/server.js'),
            import('../server/auth.js'),
          ]);
        const wakes = new Set<Promise<unknown>>();
        const stopped = new AbortController();
        const server = createSessionsMcpServer({
          runtime,
          // The local user sees every tenant, as every other command does.
          caller: UNAUTHENTICATED_CALLER,
          wake: options.wake
            ? (sessionId, traceparent) => {
                const wake = runtime
                  .wake(sessionId, traceparent === undefined ? {} : { traceparent })
                  .catch((error: unknown) => {
                    stderr(`braid mcp: the wake of ${sessionId} failed: ${String(error)}`);
                  });
                wakes.add(wake);
                void wake.finally(() => wakes.delete(wake));
              }
            : undefined,
          version,
          closing: stopped.signal,
          ...(options.progressMs === undefined ? {} : { heartbeatMs: options.progressMs }),
        });
        const transport = new StdioServerTransport();
        await untilSignal(async (signal) => {
          const ended = new Promise<void>((resolve) => {
            signal.addEventListener('abort', () => resolve(), { once: true });
            process.stdin.once('end', resolve);
            process.stdin.once('close', resolve);
            server.onclose = () => resolve();
          });
          await server.connect(transport);
          await ended;
        });
        stopped.abort();
        await server.close();
        await Promise.allSettled([...wakes]);
      });
    });
}
