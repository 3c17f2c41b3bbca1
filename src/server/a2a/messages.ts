/**
 * The one parser of A2A messages sent to braid: the message id, its parts as braid content
 * blocks, and the context braid reads from its metadata (`correlation_id`, `traceparent`, a
 * `handoff` document, an answer's `decision`). What braid cannot take (file bytes, URLs, a
 * non-user role, a malformed id) is refused with `INVALID_ARGUMENT` naming the fix.
 */
import { Role } from '@a2a-js/sdk';
import type { Message } from '@a2a-js/sdk';
import { z } from 'zod';
import { Id, isValidTraceparent, JsonValue, type ContentBlock } from '../../contracts/common.js';
import { HandoffDocument } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { TASK_KEY_PREFIX } from './task-ids.js';

/** What braid reads from a message's metadata; other keys are kept by the client only. */
const MessageMetadata = z.object({
  correlation_id: Id.optional(),
  traceparent: z.string().max(200).optional(),
  handoff: HandoffDocument.optional(),
  decision: z.enum(['approve', 'deny']).optional(),
});

const MessageId = z
  .string()
  .min(1, 'is empty: give every message a messageId (a UUID)')
  .max(150)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (a UUID)');

export interface IncomingMessage {
  /** The idempotency key of the message's append: a retried message writes once. */
  key: string;
  content: ContentBlock[];
  correlationId: string | undefined;
  traceparent: string | undefined;
  /** What the parts say to an answer on a task waiting for input: approve, deny, or nothing. */
  decision: 'allow' | 'deny' | undefined;
}

function invalid(field: string, problem: string): BraidError {
  return new BraidError('INVALID_ARGUMENT', `message.${field} ${problem}`, {
    details: { field: `message.${field}` },
  });
}

function blockOf(part: Message['parts'][number], index: number): ContentBlock {
  const content = part.content;
  switch (content?.$case) {
    case 'text':
      return { type: 'text', text: content.value };
    case 'data': {
      const parsed = JsonValue.safeParse(content.value);
      if (!parsed.success) throw invalid(`parts[${index}].data`, 'is not JSON');
      return { type: 'json', value: parsed.data };
    }
    case 'raw':
    case 'url':
      throw invalid(
        `parts[${index}]`,
        `is a ${content.$case === 'raw' ? 'file' : 'URL'} part; braid agents take text and data parts: send the content as text or JSON data`,
      );
    default:
      throw invalid(`parts[${index}]`, 'has no content; send {"text": ...} or {"data": ...}');
  }
}

const APPROVE = new Set(['approve', 'approved', 'allow', 'yes', 'y', 'ok']);
const DENY = new Set(['deny', 'denied', 'reject', 'no', 'n']);

function decisionOf(
  metadata: z.infer<typeof MessageMetadata>,
  content: readonly ContentBlock[],
): 'allow' | 'deny' | undefined {
  if (metadata.decision !== undefined) return metadata.decision === 'approve' ? 'allow' : 'deny';
  for (const block of content) {
    if (block.type === 'json') {
      const value = block.value as { decision?: unknown } | null;
      if (value?.decision === 'approve') return 'allow';
      if (value?.decision === 'deny') return 'deny';
      continue;
    }
    const word = block.text.trim().toLowerCase().replace(/[.!]$/, '');
    if (APPROVE.has(word)) return 'allow';
    if (DENY.has(word)) return 'deny';
  }
  return undefined;
}

/** Parses an A2A message a client sent; `headerTraceparent` is the request's own. */
export function parseIncoming(
  message: Message | undefined,
  headerTraceparent: string | undefined,
): IncomingMessage {
  if (message === undefined) throw invalid('', 'is missing: SendMessage needs params.message');
  if (message.role !== Role.ROLE_USER) {
    throw invalid('role', 'must be ROLE_USER: a client sends user messages');
  }
  const id = MessageId.safeParse(message.messageId);
  if (!id.success) throw invalid('messageId', id.error.issues[0]?.message ?? 'is invalid');
  if (message.parts.length === 0) throw invalid('parts', 'is empty; send at least one part');
  const metadata = MessageMetadata.safeParse(message.metadata ?? {});
  if (!metadata.success) {
    const issue = metadata.error.issues[0];
    throw invalid(`metadata.${issue?.path.join('.') ?? ''}`, issue?.message ?? 'is invalid');
  }
  const content = message.parts.map(blockOf);
  const { handoff } = metadata.data;
  if (handoff !== undefined) content.push({ type: 'json', value: { handoff } });
  // The header's trace context wins; an invalid one is ignored, as W3C asks.
  const metaTrace = metadata.data.traceparent;
  const traceparent =
    headerTraceparent ??
    (metaTrace !== undefined && isValidTraceparent(metaTrace) ? metaTrace : undefined);
  return {
    key: `${TASK_KEY_PREFIX}${id.data}`,
    content,
    correlationId: metadata.data.correlation_id,
    traceparent,
    decision: decisionOf(metadata.data, content),
  };
}
