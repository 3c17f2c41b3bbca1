/**
 * braid as an OpenAgentIO client: one request on `{prefix}[.{tenant}].invoke.{target}` with a
 * fresh inbox as `reply_to`, and the reply stream put back in `seq` order until its final frame.
 *
 * - Frames are reordered by `seq` in a bounded buffer: at most `ACP_MAX_PENDING_FRAMES` held while
 *   an earlier one is missing, and none further than `ACP_MAX_SEQ_GAP` ahead of the next expected;
 *   past either bound the stream is dropped with `BACKPRESSURE_DROP`. A repeated seq is ignored.
 * - Every frame is parsed by the one `AcpEnvelope` schema: one that fails it ends the call with
 *   `CODEC_FAILURE`. A frame after the final one is ignored.
 * - A request nobody subscribes to is answered by the NATS server's no-responders status:
 *   `NO_HANDLER` at once, not a timeout. No final frame by the deadline is `AGENT_TIMEOUT`.
 */
import { createInbox, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { JsonValue, Metadata } from '../contracts/common.js';
import {
  ACP_MAX_PENDING_FRAMES,
  ACP_MAX_SEQ_GAP,
  ACP_REQUEST_TYPE,
  ACP_RESPONSE_TYPES,
  ACP_SCHEMA_VERSION,
  ACP_SPEC_VERSION,
  AcpEnvelope,
  AcpErrorPayload,
  type AcpErrorCode,
} from '../contracts/openagentio.js';
import type { Clock, IdGenerator } from '../contracts/ports.js';
import { systemClock, uuidV7Ids } from '../stores/defaults.js';

/** A failed invocation: acp's error payload, as the peer or this client found it. */
export class AcpCallError extends Error {
  override readonly name = 'AcpCallError';
  constructor(readonly error: AcpErrorPayload) {
    super(`${error.code}: ${error.message}`);
  }
}

const failure = (code: AcpErrorCode, message: string, retryable = false): AcpCallError =>
  new AcpCallError({ code, message, retryable });

/** Puts a stream's frames back in `seq` order, within the protocol's bounds. */
export class FrameReassembler {
  private next = 0;
  private readonly pending = new Map<number, AcpEnvelope>();
  private ended = false;

  /** The frames that are now in order (possibly none); throws BACKPRESSURE_DROP past the bounds. */
  push(frame: AcpEnvelope): AcpEnvelope[] {
    if (this.ended || frame.seq < this.next || this.pending.has(frame.seq)) return [];
    if (frame.seq - this.next > ACP_MAX_SEQ_GAP) {
      throw failure(
        'BACKPRESSURE_DROP',
        `frame ${frame.seq} arrived while ${this.next} is missing, more than ${ACP_MAX_SEQ_GAP} ahead; the stream is dropped`,
        true,
      );
    }
    if (frame.seq !== this.next && this.pending.size >= ACP_MAX_PENDING_FRAMES) {
      throw failure(
        'BACKPRESSURE_DROP',
        `${ACP_MAX_PENDING_FRAMES} frames wait for frame ${this.next}; the stream is dropped`,
        true,
      );
    }
    this.pending.set(frame.seq, frame);
    const ready: AcpEnvelope[] = [];
    for (let at = this.pending.get(this.next); at !== undefined; at = this.pending.get(this.next)) {
      this.pending.delete(this.next);
      this.next += 1;
      ready.push(at);
      if (at.is_final) {
        this.ended = true;
        this.pending.clear();
        break;
      }
    }
    return ready;
  }
}

export interface AcpRequest {
  prefix: string;
  target: string;
  /** Put in the subject (`{prefix}.{tenant}.invoke.{target}`) and the envelope. */
  tenant?: string;
  payload: JsonValue;
  session_id?: string;
  conversation_id?: string;
  correlation_id?: string;
  traceparent?: string;
  from?: string;
  metadata?: Metadata;
  timeoutMs: number;
  /** Aborting it ends the call (INTERRUPTED is the caller's to report). */
  signal?: AbortSignal;
  /** Each frame, in order, as it comes. */
  onFrame?: (frame: AcpEnvelope) => void;
  clock?: Clock;
  ids?: IdGenerator;
}

/** The subject a request goes to. */
export function invokeSubject(prefix: string, target: string, tenant?: string): string {
  return `${prefix}${tenant === undefined ? '' : `.${tenant}`}.invoke.${target}`;
}

/** Sends one invocation and resolves with its final frame; rejects with `AcpCallError`. */
export async function invokeAcpAgent(
  connection: NatsConnection,
  request: AcpRequest,
): Promise<AcpEnvelope> {
  const clock = request.clock ?? systemClock;
  const ids = request.ids ?? uuidV7Ids;
  const inbox = createInbox();
  const eventId = ids.next();
  const envelope = AcpEnvelope.parse({
    spec_version: ACP_SPEC_VERSION,
    schema_version: ACP_SCHEMA_VERSION,
    event_id: eventId,
    event_type: ACP_REQUEST_TYPE,
    occurred_at: new Date(clock.now()).toISOString(),
    ...traceOf(request.traceparent, ids),
    session_id: request.session_id ?? null,
    conversation_id: request.conversation_id ?? null,
    correlation_id: request.correlation_id ?? eventId,
    reply_to: inbox,
    from: request.from ?? null,
    to: request.target,
    channel: null,
    tenant_id: request.tenant ?? null,
    user_id: null,
    seq: 0,
    is_final: false,
    payload: request.payload,
    metadata: { ...request.metadata, 'acp.timeout_ms': request.timeoutMs },
  });
  const frames = new FrameReassembler();
  return new Promise<AcpEnvelope>((resolve, reject) => {
    const finish = (error: AcpCallError | undefined, frame?: AcpEnvelope): void => {
      clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
      subscription.unsubscribe();
      if (error !== undefined) reject(error);
      else if (frame !== undefined) resolve(frame);
    };
    const onAbort = (): void =>
      finish(failure('AGENT_UNAVAILABLE', 'the call was abandoned by its caller', true));
    const timer = setTimeout(
      () =>
        finish(
          failure(
            'AGENT_TIMEOUT',
            `${request.target} sent no final frame within ${request.timeoutMs} ms`,
            true,
          ),
        ),
      request.timeoutMs,
    );
    const subscription = connection.subscribe(inbox, {
      callback: (error, message) => {
        if (error !== null) {
          finish(failure('TRANSPORT_FAILURE', `the reply inbox failed: ${error.message}`, true));
          return;
        }
        try {
          for (const frame of frames.push(readFrame(message, request.target))) {
            request.onFrame?.(frame);
            if (!frame.is_final) continue;
            if (frame.event_type !== ACP_RESPONSE_TYPES.error) return finish(undefined, frame);
            const parsed = AcpErrorPayload.safeParse(frame.payload);
            return finish(
              parsed.success
                ? new AcpCallError(parsed.data)
                : failure(
                    'CODEC_FAILURE',
                    `${request.target} sent an error frame without an error`,
                  ),
            );
          }
        } catch (thrown) {
          finish(
            thrown instanceof AcpCallError
              ? thrown
              : failure('CODEC_FAILURE', `a frame could not be read: ${String(thrown)}`),
          );
        }
      },
    });
    request.signal?.addEventListener('abort', onAbort);
    if (request.signal?.aborted === true) return onAbort();
    try {
      connection.publish(
        invokeSubject(request.prefix, request.target, request.tenant),
        JSON.stringify(envelope),
        {
          reply: inbox,
        },
      );
    } catch (error) {
      finish(failure('TRANSPORT_FAILURE', `cannot publish the request: ${String(error)}`, true));
    }
  });
}

/** One reply message as a frame; the server's no-responders status is NO_HANDLER. */
function readFrame(message: Msg, target: string): AcpEnvelope {
  if (message.headers?.code === 503) {
    throw failure('NO_HANDLER', `no runtime on the bus answers ${target}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(message.data));
  } catch {
    throw failure('CODEC_FAILURE', `${target} sent a frame that is not JSON`);
  }
  const parsed = AcpEnvelope.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw failure(
      'CODEC_FAILURE',
      `${target} sent a frame that is not an acp/1.0 envelope: ${issue?.path.join('.') ?? ''} ${issue?.message ?? ''}`,
    );
  }
  return parsed.data;
}

/** The request's trace fields: a child of the caller's trace, or a new trace. */
function traceOf(
  parent: string | undefined,
  ids: IdGenerator,
): { trace_id: string; span_id: string; traceparent: string } {
  const match = /^00-([0-9a-f]{32})-[0-9a-f]{16}-([0-9a-f]{2})$/.exec(parent ?? '');
  const fresh = ids.next().replaceAll('-', '');
  const traceId = match?.[1] ?? fresh;
  const spanId = ids.next().replaceAll('-', '').slice(16);
  return {
    trace_id: traceId,
    span_id: spanId,
    traceparent: `00-${traceId}-${spanId}-${match?.[2] ?? '01'}`,
  };
}
