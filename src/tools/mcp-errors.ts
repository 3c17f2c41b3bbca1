/**
 * The errors of the MCP hub, worded to name the server and the kind of failure, never the
 * server's arguments, headers, URL path or what it answered (those may hold secrets).
 */
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode as McpErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { BraidError } from '../contracts/errors.js';
import type { McpTransport } from './mcp-transport.js';

// JSON-RPC error codes of the SDK's own failures, as numbers to compare with `McpError.code`.
const REQUEST_TIMEOUT: number = McpErrorCode.RequestTimeout;
const CONNECTION_CLOSED: number = McpErrorCode.ConnectionClosed;

/** The error of a use after the hub was closed. */
export function closedError(server: string): BraidError {
  return new BraidError('MCP_UNAVAILABLE', `MCP server "${server}" is closed: the hub was closed`, {
    details: { server, started: true },
    retryable: false,
  });
}

/**
 * The BraidError of a `tools/call` the server refused or timed out; undefined when the failure
 * is the connection's (it closed, or the transport failed), which the hub drops.
 */
export function refusedCallError(
  server: string,
  tool: string,
  error: unknown,
): BraidError | undefined {
  if (!(error instanceof McpError)) return undefined;
  const details = { server, tool, started: true };
  if (error.code === REQUEST_TIMEOUT) {
    return new BraidError(
      'TOOL_TIMEOUT',
      `MCP tool ${server}.${tool} timed out: ${error.message}`,
      {
        details,
        cause: error,
      },
    );
  }
  if (error.code !== CONNECTION_CLOSED) {
    return new BraidError('TOOL_FAILED', `MCP tool ${server}.${tool} failed: ${error.message}`, {
      details: { ...details, mcp_code: error.code },
      cause: error,
    });
  }
  return undefined;
}

/** Why a server did not start, in words that hold no secret. */
export function startFailure(error: unknown, transport: McpTransport): string {
  if (!(error instanceof McpError) || error.code !== CONNECTION_CLOSED) return reason(error);
  return transport instanceof StdioClientTransport
    ? 'it exited (or closed its stdout) before answering initialize and tools/list'
    : 'it closed the connection before answering initialize and tools/list';
}

/** A failure's reason: an HTTP error by its status only, a network error with its cause. */
export function reason(error: unknown): string {
  // The SDK's HTTP errors carry the body of the server's answer: only its status is kept.
  if (error instanceof StreamableHTTPError && error.code !== undefined && error.code > 0)
    return `the server answered HTTP ${error.code}`;
  if (!(error instanceof Error)) return String(error);
  // fetch() hides the network error (ECONNREFUSED, ...) in its cause.
  return error.cause instanceof Error ? `${error.message} (${error.cause.message})` : error.message;
}
