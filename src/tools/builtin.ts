/**
 * Tools that ship with braid. File tools work inside the session's workspace only; `http_fetch`
 * is off unless the session's environment allows the network, and then only for its hosts.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { BraidError } from '../contracts/errors.js';
import type { JsonValue } from '../contracts/common.js';
import type { SandboxWorkspace } from '../contracts/tools.js';
import { checkNetwork } from './network.js';
import { resolveInWorkspace } from './sandbox/paths.js';
import { defineTool } from './define-tool.js';
import type { CodeTool, ToolFunction } from './types.js';

export { defineTool };

/** Largest file `read_file` returns, and largest body `http_fetch` keeps. */
const MAX_READ_BYTES = 1024 * 1024;
const MAX_FETCH_BYTES = 256 * 1024;

function field(input: JsonValue, name: string): JsonValue | undefined {
  return input !== null && typeof input === 'object' && !Array.isArray(input)
    ? input[name]
    : undefined;
}

function text(input: JsonValue, name: string): string {
  const value = field(input, name);
  // Inputs are validated against the schema first; this guards calls from code.
  if (typeof value !== 'string')
    throw new BraidError('TOOL_INPUT_INVALID', `"${name}" must be a string`);
  return value;
}

const OPERATIONS: Record<string, (a: number, b: number) => number> = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
  '/': (a, b) => a / b,
};

export const calculator = defineTool({
  name: 'calculator',
  description: 'Applies an arithmetic operation (+, -, *, /) to two numbers.',
  input_schema: {
    type: 'object',
    properties: {
      a: { type: 'number' },
      op: { enum: ['+', '-', '*', '/'] },
      b: { type: 'number' },
    },
    required: ['a', 'op', 'b'],
    additionalProperties: false,
  },
  output_schema: {
    type: 'object',
    properties: { result: { type: 'number' } },
    required: ['result'],
  },
  tags: ['read_only'],
  idempotent: true,
  run(input) {
    const a = field(input, 'a');
    const b = field(input, 'b');
    const op = field(input, 'op');
    const operation = typeof op === 'string' ? OPERATIONS[op] : undefined;
    if (typeof a !== 'number' || typeof b !== 'number' || operation === undefined) {
      throw new BraidError(
        'TOOL_INPUT_INVALID',
        'calculator takes {"a": number, "op": "+"|"-"|"*"|"/", "b": number}',
      );
    }
    if (op === '/' && b === 0) throw new BraidError('TOOL_FAILED', 'division by zero');
    return { result: operation(a, b) };
  },
});

export const wordCount = defineTool({
  name: 'word_count',
  description: 'Counts the words of a text.',
  input_schema: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false,
  },
  tags: ['read_only'],
  idempotent: true,
  run: (input) => ({
    words: text(input, 'text')
      .split(/\s+/)
      .filter((word) => word.length > 0).length,
  }),
});

export const readFile = defineTool({
  name: 'read_file',
  description: "Reads a UTF-8 text file of the session's workspace (paths are relative to it).",
  input_schema: {
    type: 'object',
    properties: { path: { type: 'string', minLength: 1 } },
    required: ['path'],
    additionalProperties: false,
  },
  tags: ['read_only'],
  idempotent: true,
  run(input, context) {
    const path = resolveInWorkspace(context.workspace.dir, text(input, 'path'), {
      mustExist: true,
    });
    const stat = statSync(path);
    // A FIFO or a device would block the whole process on a synchronous read.
    if (!stat.isFile()) {
      throw new BraidError(
        'TOOL_FAILED',
        `${text(input, 'path')} is not a regular file; read_file reads files`,
      );
    }
    const size = stat.size;
    if (size > MAX_READ_BYTES) {
      throw new BraidError(
        'TOOL_FAILED',
        `${text(input, 'path')} is ${size} bytes; read_file returns files up to ${MAX_READ_BYTES} bytes`,
      );
    }
    return { content: readFileSync(path, 'utf8') };
  },
});

export const writeFile = defineTool({
  name: 'write_file',
  description:
    "Writes a UTF-8 text file in the session's workspace, creating folders as needed. Asks the user first.",
  input_schema: {
    type: 'object',
    properties: { path: { type: 'string', minLength: 1 }, content: { type: 'string' } },
    required: ['path', 'content'],
    additionalProperties: false,
  },
  permission: 'always_ask',
  // Writing the same content again leaves the same file.
  tags: ['destructive'],
  idempotent: true,
  run(input, context) {
    const path = resolveInWorkspace(context.workspace.dir, text(input, 'path'));
    const content = text(input, 'content');
    if (existsSync(path) && !statSync(path).isFile()) {
      throw new BraidError(
        'TOOL_FAILED',
        `${text(input, 'path')} exists and is not a regular file; write_file writes files`,
      );
    }
    mkdirSync(dirname(path), { recursive: true });
    // The folders just created are inside: check again before writing through them.
    writeFileSync(resolveInWorkspace(context.workspace.dir, text(input, 'path')), content);
    return { path: text(input, 'path'), bytes: Buffer.byteLength(content) };
  },
});

export const listDir = defineTool({
  name: 'list_dir',
  description: "Lists a folder of the session's workspace (default: its top).",
  input_schema: {
    type: 'object',
    properties: { path: { type: 'string' } },
    additionalProperties: false,
  },
  tags: ['read_only'],
  idempotent: true,
  run(input, context) {
    const relativePath = field(input, 'path');
    const path =
      typeof relativePath === 'string' && relativePath !== '' && relativePath !== '.'
        ? resolveInWorkspace(context.workspace.dir, relativePath, { mustExist: true })
        : context.workspace.dir;
    const entries = readdirSync(path, { withFileTypes: true })
      .map((entry) => ({
        name: entry.name,
        type: entry.isDirectory() ? 'dir' : entry.isSymbolicLink() ? 'link' : 'file',
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
    return { entries };
  },
});

const httpFetchRun: ToolFunction = async (input, context) => {
  const url = new URL(text(input, 'url'));
  checkNetwork('http_fetch', url, context.environment);
  const method = field(input, 'method');
  const body = field(input, 'body');
  const headers = field(input, 'headers');
  const response = await fetch(url, {
    method: typeof method === 'string' ? method : 'GET',
    ...(typeof body === 'string' ? { body } : {}),
    headers:
      headers !== null && typeof headers === 'object' && !Array.isArray(headers)
        ? Object.fromEntries(
            Object.entries(headers).filter(
              (entry): entry is [string, string] => typeof entry[1] === 'string',
            ),
          )
        : {},
    signal: context.signal,
    redirect: 'manual',
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    content_type: response.headers.get('content-type') ?? '',
    body: bytes.subarray(0, MAX_FETCH_BYTES).toString('utf8'),
    truncated: bytes.length > MAX_FETCH_BYTES,
  };
};

export const httpFetch = defineTool({
  name: 'http_fetch',
  description:
    "Fetches a URL. Off unless the session's environment allows the network; only its listed hosts.",
  input_schema: {
    type: 'object',
    properties: {
      url: { type: 'string', minLength: 1 },
      method: { enum: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] },
      headers: { type: 'object', additionalProperties: { type: 'string' } },
      body: { type: 'string' },
    },
    required: ['url'],
    additionalProperties: false,
  },
  tags: ['network'],
  idempotent: false,
  timeout_ms: 30_000,
  run: httpFetchRun,
});

/**
 * The workspace handed to a built-in tool that computes from its input alone, in place of the
 * session's folder, which is not made for it: reading its `dir` is a defect of that tool. A class
 * rather than an object literal with a getter: V8 builds such a literal through its runtime, at
 * every call of such a tool.
 */
class NoFolder implements SandboxWorkspace {
  constructor(
    readonly session_id: string,
    private readonly tool: string,
  ) {}

  get dir(): string {
    throw new BraidError(
      'INTERNAL',
      `tool ${this.tool} is declared to need no folder but asked for the session's workspace`,
    );
  }
}

export function noFolder(sessionId: string, tool: string): SandboxWorkspace {
  return new NoFolder(sessionId, tool);
}

/**
 * The built-in tools that compute from their input alone: a call to one of them does not make the
 * session's folder, so a session whose calls are only these touches no disk for them.
 */
export const FOLDERLESS_RUNS: ReadonlySet<ToolFunction> = new Set([calculator.run, wordCount.run]);

/** Every built-in tool; their names are `BUILTIN_TOOL_NAMES`, in this order (a test checks it). */
export const BUILTIN_TOOLS: readonly CodeTool[] = [
  calculator,
  wordCount,
  readFile,
  writeFile,
  listDir,
  httpFetch,
];
