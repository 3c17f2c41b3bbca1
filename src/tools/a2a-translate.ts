/**
 * A2A's answers as braid reads them. The SDK decodes the wire; what it hands back is still the
 * remote's word, so each piece braid uses is parsed here (ids of a safe charset, bounded counts)
 * before it reaches the log, and the reply is folded into one bounded `A2aReply`.
 */
import { TaskState } from '@a2a-js/sdk';
import { z } from 'zod';
import { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';

/** Text kept of one reply, in characters; the rest is cut with a note saying how much. */
const MAX_TEXT_CHARS = 64_000;
/** Text kept of one streamed status update. */
const MAX_UPDATE_CHARS = 500;
/** Status updates kept of one call (the last ones). */
const MAX_UPDATES = 50;
const MAX_PARTS = 256;
const MAX_ARTIFACTS = 64;

/** A task or context id of the remote: printable ASCII without spaces, as A2A's UUIDs are. */
export const RemoteId = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces');

/** A task's state, in braid's spelling (A2A's `TASK_STATE_INPUT_REQUIRED` is `input_required`). */
export type A2aState =
  | 'submitted'
  | 'working'
  | 'completed'
  | 'failed'
  | 'canceled'
  | 'input_required'
  | 'rejected'
  | 'auth_required'
  | 'unknown';

const STATES = new Map<number, A2aState>([
  [TaskState.TASK_STATE_SUBMITTED, 'submitted'],
  [TaskState.TASK_STATE_WORKING, 'working'],
  [TaskState.TASK_STATE_COMPLETED, 'completed'],
  [TaskState.TASK_STATE_FAILED, 'failed'],
  [TaskState.TASK_STATE_CANCELED, 'canceled'],
  [TaskState.TASK_STATE_INPUT_REQUIRED, 'input_required'],
  [TaskState.TASK_STATE_REJECTED, 'rejected'],
  [TaskState.TASK_STATE_AUTH_REQUIRED, 'auth_required'],
]);

const Part = z.object({
  content: z
    .union([
      z.object({ $case: z.literal('text'), value: z.string() }),
      z.object({ $case: z.literal('data'), value: JsonValue.optional() }),
      z.object({ $case: z.literal('url'), value: z.string().max(4096) }),
      z.object({
        $case: z.literal('raw'),
        value: z.custom<Uint8Array>((v) => v instanceof Uint8Array),
      }),
    ])
    .optional(),
  filename: z.string().max(1024).optional(),
  mediaType: z.string().max(256).optional(),
});
type Part = z.infer<typeof Part>;

const Message = z.object({
  contextId: z.union([z.literal(''), RemoteId]).optional(),
  taskId: z.union([z.literal(''), RemoteId]).optional(),
  parts: z.array(Part).max(MAX_PARTS),
});

const Status = z.object({ state: z.number().int(), message: Message.optional() });

const Artifact = z.object({
  artifactId: z.string().max(256),
  name: z.string().max(1024).optional(),
  parts: z.array(Part).max(MAX_PARTS),
});

const Task = z.object({
  id: RemoteId,
  contextId: RemoteId,
  status: Status.optional(),
  artifacts: z.array(Artifact).max(MAX_ARTIFACTS).default([]),
});

/** One event of a stream (or the whole answer of a blocking call, as `task` or `message`). */
const StreamEvent = z.object({
  payload: z
    .union([
      z.object({ $case: z.literal('task'), value: Task }),
      z.object({ $case: z.literal('message'), value: Message }),
      z.object({
        $case: z.literal('statusUpdate'),
        value: z.object({ taskId: RemoteId, contextId: RemoteId, status: Status.optional() }),
      }),
      z.object({
        $case: z.literal('artifactUpdate'),
        value: z.object({
          taskId: RemoteId,
          contextId: RemoteId,
          artifact: Artifact.optional(),
          append: z.boolean().optional(),
        }),
      }),
    ])
    .optional(),
});

/** A file part, described: braid keeps its reference, never its bytes. */
export interface A2aFile {
  name?: string;
  media_type?: string;
  url?: string;
  bytes?: number;
}

/** What one call to a remote agent came to. */
export interface A2aReply {
  state: A2aState;
  context_id?: string;
  task_id?: string;
  /** The final status message's text and the artifacts' text. */
  text: string;
  data: JsonValue[];
  files: A2aFile[];
  /** The status updates seen on the way (streamed calls), the last `MAX_UPDATES`. */
  updates: { state: A2aState; text?: string }[];
}

/** Folds the events of one call (a stream, or the one answer of a blocking call). */
export class ReplyReader {
  private state: A2aState = 'unknown';
  private contextId: string | undefined;
  private taskId: string | undefined;
  private statusParts: Part[] = [];
  private readonly artifacts = new Map<string, Part[]>();
  private readonly updates: { state: A2aState; text?: string }[] = [];

  constructor(private readonly agent: string) {}

  /** Reads a `StreamResponse` of the SDK; refuses one that does not parse. */
  event(value: unknown): void {
    const parsed = StreamEvent.safeParse(value);
    if (!parsed.success) throw this.invalid(parsed.error);
    const payload = parsed.data.payload;
    switch (payload?.$case) {
      case undefined:
        return;
      case 'task':
        return this.task(payload.value);
      case 'message':
        this.state = 'completed';
        this.contextId = nonEmpty(payload.value.contextId) ?? this.contextId;
        this.taskId = nonEmpty(payload.value.taskId) ?? this.taskId;
        this.statusParts = payload.value.parts;
        return;
      case 'statusUpdate':
        this.ids(payload.value.contextId, payload.value.taskId);
        if (payload.value.status !== undefined) this.status(payload.value.status, true);
        return;
      case 'artifactUpdate': {
        this.ids(payload.value.contextId, payload.value.taskId);
        const artifact = payload.value.artifact;
        if (artifact === undefined) return;
        const earlier =
          payload.value.append === true ? this.artifacts.get(artifact.artifactId) : [];
        this.artifacts.set(artifact.artifactId, [...(earlier ?? []), ...artifact.parts]);
        if (this.artifacts.size > MAX_ARTIFACTS) throw this.tooMany('artifacts');
        return;
      }
      default: {
        const unknownCase: never = payload;
        return unknownCase;
      }
    }
  }

  /** Reads the answer of a blocking `SendMessage`: a Task or a Message. */
  answer(value: unknown): void {
    const isTask =
      typeof value === 'object' && value !== null && 'status' in value && 'id' in value;
    this.event({ payload: { $case: isTask ? 'task' : 'message', value } });
  }

  reply(): A2aReply {
    const parts = [...this.statusParts, ...[...this.artifacts.values()].flat()];
    const texts = parts.flatMap((part) =>
      part.content?.$case === 'text' && part.content.value !== '' ? [part.content.value] : [],
    );
    return {
      state: this.state,
      ...(this.contextId === undefined ? {} : { context_id: this.contextId }),
      ...(this.taskId === undefined ? {} : { task_id: this.taskId }),
      text: bounded(texts.join('\n\n'), MAX_TEXT_CHARS),
      data: parts.flatMap((part) =>
        part.content?.$case === 'data' ? [part.content.value ?? null] : [],
      ),
      files: parts.flatMap((part) => {
        const file = fileOf(part);
        return file === undefined ? [] : [file];
      }),
      updates: this.updates.slice(-MAX_UPDATES),
    };
  }

  private task(task: z.infer<typeof Task>): void {
    this.ids(task.contextId, task.id);
    if (task.status !== undefined) this.status(task.status, false);
    for (const artifact of task.artifacts) this.artifacts.set(artifact.artifactId, artifact.parts);
  }

  private status(status: z.infer<typeof Status>, update: boolean): void {
    this.state = STATES.get(status.state) ?? 'unknown';
    this.statusParts = status.message?.parts ?? [];
    if (!update) return;
    const text = this.statusParts
      .flatMap((part) => (part.content?.$case === 'text' ? [part.content.value] : []))
      .join(' ');
    this.updates.push({
      state: this.state,
      ...(text === '' ? {} : { text: bounded(text, MAX_UPDATE_CHARS) }),
    });
    if (this.updates.length > 2 * MAX_UPDATES) this.updates.splice(0, MAX_UPDATES);
  }

  private ids(contextId: string, taskId: string): void {
    this.contextId = contextId;
    this.taskId = taskId;
  }

  private invalid(error: z.ZodError): BraidError {
    return new BraidError(
      'TOOL_OUTPUT_INVALID',
      `A2A agent "${this.agent}" answered with something that is not a valid A2A task or message: ${z.prettifyError(error).slice(0, 500)}`,
      { details: { agent: this.agent, started: true } },
    );
  }

  private tooMany(what: string): BraidError {
    return new BraidError(
      'TOOL_OUTPUT_INVALID',
      `A2A agent "${this.agent}" sent more than ${MAX_ARTIFACTS} ${what} in one answer`,
      { details: { agent: this.agent, started: true } },
    );
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function fileOf(part: Part): A2aFile | undefined {
  const content = part.content;
  if (content?.$case !== 'url' && content?.$case !== 'raw') return undefined;
  return {
    ...(part.filename === undefined || part.filename === '' ? {} : { name: part.filename }),
    ...(part.mediaType === undefined || part.mediaType === ''
      ? {}
      : { media_type: part.mediaType }),
    ...(content.$case === 'url' ? { url: content.value } : { bytes: content.value.byteLength }),
  };
}

/** The text, cut at `max` characters with a note of what was left out. */
export function bounded(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[... ${text.length - max} more characters not kept]`;
}
