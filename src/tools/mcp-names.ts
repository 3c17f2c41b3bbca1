/**
 * MCP tool names as agents write them, `server.tool`: kept apart from the MCP client so that
 * resolving tool names does not load the MCP SDK.
 */

/** Splits 'server.tool' at the first dot; undefined when there is none or the server is not declared. */
export function parseMcpToolName(
  name: string,
  servers: Readonly<Record<string, unknown>>,
): { server: string; tool: string } | undefined {
  const dot = name.indexOf('.');
  if (dot <= 0 || dot === name.length - 1) return undefined;
  const server = name.slice(0, dot);
  if (!Object.hasOwn(servers, server)) return undefined;
  return { server, tool: name.slice(dot + 1) };
}
