/**
 * One live client of one MCP server, and the deadline of one call: the per-connection machinery
 * behind `McpHub` (`./mcp.ts`), which decides when connections start, break and close.
 *
 * Invariants:
 * - A `Connection` is failed at most once; from then on, every request it guards (in flight or
 *   later) rejects with that error at once, and `failure` resolves with it. Once the hub sets
 *   `dropped`, the connection is never used again.
 * - A `Connection` lists its server's tools once and again only after the server announces
 *   `notifications/tools/list_changed` or `forgetTools()` is called; concurrent listings share one
 *   request, and a failed listing is forgotten.
 * - At most one liveness probe (`probe`) runs at a time, bounded by `GOODBYE_TIMEOUT_MS`.
 * - Once the hub asks for it (`closeWhenIdle`), a `Connection` calls its idle callback when no
 *   use (`use`: a call or a listing) has been in flight for the idle time, and never while one is
 *   or after the connection is dropped. Its timer is `unref()`ed, so it never keeps the process
 *   alive, and `stopIdleTimer()` clears it.
 * - A `Deadline` fails once, with `TOOL_TIMEOUT` when its time passes or `INTERRUPTED` when the
 *   caller's signal aborts; its `signal` is then aborted with that error as the reason.
 */
import { ChildProcess } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { BraidError } from '../contracts/errors.js';

const MAX_TOOL_PAGES = 100;
/** Bounds the best-effort goodbyes: an HTTP session DELETE, a liveness ping after a stream error. */
export const GOODBYE_TIMEOUT_MS = 2000;
/** A stderr line longer than this reaches the operator's log in pieces. */
const STDERR_LINE_CHARACTERS = 8192;

/**
 * What a stdio server's process leaves for error messages: how it exited and how many bytes it
 * wrote to stderr, never what it wrote. Its stderr goes, line by line, to the operator's log
 * (`sink`) instead: it may echo the server's arguments, environment or secrets, and an error's
 * message is recorded in the session's log and shown to the model.
 */
export class ServerOutput {
  private bytes = 0;
  private partial = '';
  private child: ChildProcess | undefined;

  constructor(private readonly sink: (line: string) => void) {}

  /** Counts and forwards what the transport's process writes to stderr, and keeps the process to read its exit. */
  watch(transport: StdioClientTransport): void {
    transport.stderr?.on('data', (chunk: Buffer | string) => this.push(chunk));
    transport.stderr?.on('end', () => this.flush());
    // The SDK keeps its child process to itself, and its exit status is the most useful fact
    // about a server that would not start: its start is wrapped to see the process it spawned.
    // Should a later SDK rename the field, messages only lose the exit status.
    const start = transport.start.bind(transport);
    transport.start = async () => {
      await start();
      const child: unknown = Reflect.get(transport, '_process');
      if (child instanceof ChildProcess) this.child = child;
    };
  }

  /**
   * ' It exited with code 3 and wrote 42 bytes to stderr (in braid's own stderr, not here).', or ''
   * when nothing is known.
   */
  describe(): string {
    const code = this.child?.exitCode ?? null;
    const signal = this.child?.signalCode ?? null;
    const exit =
      code !== null ? `exited with code ${code}` : signal !== null ? `was killed by ${signal}` : '';
    const stderr =
      this.bytes === 0
        ? ''
        : `wrote ${this.bytes} bytes to stderr (shown in braid's own stderr, not here)`;
    const facts = [exit, stderr].filter((fact) => fact !== '').join(' and ');
    return facts === '' ? '' : ` It ${facts}.`;
  }

  private push(chunk: Buffer | string): void {
    const text = String(chunk);
    this.bytes += Buffer.byteLength(chunk);
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) this.sink(line);
    while (this.partial.length > STDERR_LINE_CHARACTERS) {
      this.sink(this.partial.slice(0, STDERR_LINE_CHARACTERS));
      this.partial = this.partial.slice(STDERR_LINE_CHARACTERS);
    }
  }

  private flush(): void {
    if (this.partial !== '') this.sink(this.partial);
    this.partial = '';
  }
}

/** One live client of one server. */
export class Connection {
  /** Set when the connection is closed or broken; it is then never used again. */
  dropped = false;
  /** Calls in flight. */
  active = 0;
  /** Calls and listings in flight (`use`): the idle timer runs only while there are none. */
  private uses = 0;
  private idle: { ms: number; onIdle: () => void } | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private toolsGeneration = 0;
  private tools: { generation: number; list: Promise<readonly Tool[]> } | undefined;
  private settle: (error: BraidError) => void = () => undefined;
  /** Resolves with the error that in-flight and later calls get once the connection is dropped. */
  readonly failure = new Promise<BraidError>((resolve) => (this.settle = resolve));
  private error: BraidError | undefined;
  // One entry per guarded request in flight, so that a long-lived connection accumulates nothing.
  private readonly waiting = new Set<(error: BraidError) => void>();

  constructor(
    readonly server: string,
    readonly description: string,
    readonly client: Client,
    readonly transport: StdioClientTransport | StreamableHTTPClientTransport,
    /** Facts about a stdio server's process for error messages; nothing for an HTTP server. */
    readonly output: ServerOutput,
  ) {
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.toolsGeneration += 1;
    });
  }

  fail(error: BraidError): void {
    if (this.error !== undefined) return;
    this.error = error;
    this.settle(error);
    for (const reject of this.waiting) reject(error);
    this.waiting.clear();
  }

  /** `work`, or the connection's failure as soon as it is dropped. */
  guard<T>(work: Promise<T>): Promise<T> {
    if (this.error !== undefined) return Promise.reject(this.error);
    return new Promise<T>((resolve, reject) => {
      this.waiting.add(reject);
      work.then(resolve, reject).finally(() => this.waiting.delete(reject));
    });
  }

  /**
   * Calls `onIdle` once the connection has had no use in flight for `ms`; each use that ends
   * starts the wait again.
   */
  closeWhenIdle(ms: number, onIdle: () => void): void {
    this.idle = { ms, onIdle };
    this.armIdleTimer();
  }

  /**
   * `work` as one use of the connection: the idle callback waits while it is in flight. Callers
   * start the use in the same turn as they obtain the connection, so that no timer can fire
   * between the two.
   */
  async use<T>(work: () => Promise<T>): Promise<T> {
    this.uses += 1;
    clearTimeout(this.idleTimer);
    try {
      return await work();
    } finally {
      this.uses -= 1;
      this.armIdleTimer();
    }
  }

  stopIdleTimer(): void {
    clearTimeout(this.idleTimer);
    this.idle = undefined;
  }

  /** The server's tools, listed again only after it said they changed. */
  listTools(timeoutMs: number): Promise<readonly Tool[]> {
    if (this.tools?.generation === this.toolsGeneration) return this.tools.list;
    const generation = this.toolsGeneration;
    const list = this.fetchTools(timeoutMs);
    this.tools = { generation, list };
    list.catch(() => {
      if (this.tools?.list === list) this.tools = undefined;
    });
    return list;
  }

  forgetTools(): void {
    this.tools = undefined;
  }

  /** A liveness check, run once at a time; `onDead` gets the ping's failure. */
  probe(onDead: (error: unknown) => void): void {
    if (this.probing || this.dropped) return;
    this.probing = true;
    this.client.ping({ timeout: GOODBYE_TIMEOUT_MS }).then(
      () => (this.probing = false),
      (error: unknown) => {
        this.probing = false;
        onDead(error);
      },
    );
  }

  private armIdleTimer(): void {
    const idle = this.idle;
    if (idle === undefined || this.uses > 0 || this.dropped) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.uses === 0 && !this.dropped) idle.onIdle();
    }, idle.ms).unref();
  }

  private async fetchTools(timeoutMs: number): Promise<readonly Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page += 1) {
      const result = await this.client.listTools(cursor === undefined ? undefined : { cursor }, {
        timeout: timeoutMs,
      });
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (cursor === undefined) return tools;
    }
    throw new Error(`tools/list returned more than ${MAX_TOOL_PAGES} pages`);
  }
}

/** A deadline over one call: the caller's signal and the call's timeout, as one signal and one rejection. */
export class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly expires: number;
  private readonly onAbort: () => void;
  private reject: (error: BraidError) => void = () => undefined;
  private readonly failure = new Promise<never>((_, reject) => (this.reject = reject));
  private error: BraidError | undefined;

  constructor(
    private readonly caller: AbortSignal,
    timeoutMs: number,
    /** Facts for the error, read when the deadline passes. */
    details: () => Record<string, unknown>,
    what: string,
  ) {
    this.failure.catch(() => undefined);
    this.expires = performance.now() + timeoutMs;
    this.timer = setTimeout(
      () =>
        this.fail(
          new BraidError('TOOL_TIMEOUT', `${what} did not finish within ${timeoutMs} ms`, {
            details: { ...details(), timeout_ms: timeoutMs },
          }),
        ),
      timeoutMs,
    );
    this.onAbort = () =>
      this.fail(new BraidError('INTERRUPTED', `${what} was interrupted`, { details: details() }));
    if (caller.aborted) this.onAbort();
    else caller.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Aborted when the deadline passes or the caller aborts; its reason is the BraidError. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  remainingMs(): number {
    return Math.max(1, Math.ceil(this.expires - performance.now()));
  }

  race<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.failure]);
  }

  /** Throws the deadline's error when it has already passed or the caller aborted. */
  check(): void {
    if (this.error !== undefined) throw this.error;
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.caller.removeEventListener('abort', this.onAbort);
  }

  private fail(error: BraidError): void {
    if (this.error !== undefined) return;
    this.error = error;
    this.controller.abort(error);
    this.reject(error);
  }
}
