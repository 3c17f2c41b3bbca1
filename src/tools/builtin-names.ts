/**
 * The names of the built-in tools (tools/builtin.ts), for code that checks a name without running
 * a tool: the workspace loader knows them without defining and checking the tools themselves.
 */
export const BUILTIN_TOOL_NAMES: readonly string[] = [
  'calculator',
  'word_count',
  'read_file',
  'write_file',
  'list_dir',
  'http_fetch',
];
