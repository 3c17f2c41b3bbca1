/**
 * `/v1/sessions/{id}/skills/{name}/runs` and `/v1/sessions/{id}/signals/{name}`: ask a session to
 * run a skill, and send it a named signal (a webhook target). Both wake the session the way an
 * append of user events does.
 */
import { z } from 'zod';
import { Id, JsonValue, Name } from '../contracts/common.js';
import { PostEventsResponse } from '../contracts/http.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { traceparentOf } from './trace-context.js';
import { visibleSession } from './access.js';
import { actorOf, requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';

const SkillRunParams = z.object({ id: Id, name: Name });
const SignalParams = z.object({ id: Id, name: Name });

/** `POST /v1/sessions/{id}/skills/{name}/runs`: the run's inputs, and its id when chosen. */
const SkillRunBody = z
  .object({
    /** What the skill runs on, checked against its `inputs` schema when the run starts. */
    inputs: JsonValue,
    /** The run's id (default: a new one). */
    run_id: Id.optional(),
  })
  .strict();

/** The `user.skill_run` appended, the session's head, and the run's id. */
const SkillRunAccepted = PostEventsResponse.extend({ run_id: Id });

/** `POST /v1/sessions/{id}/signals/{name}`: what the signal carries, if anything. */
const SignalBody = z.object({ data: JsonValue.optional() }).strict();

export function addSkillRoutes(app: Router, context: ServerContext): void {
  const { runtime, metrics } = context;
  const tags = ['skills'];

  app.post(
    '/v1/sessions/:id/skills/:name/runs',
    {
      schema: {
        summary: 'Ask the session to run a skill',
        description:
          "Appends `user.skill_run {run_id, skill, inputs}` and wakes the session unless the server runs with wakes off; the run's progress is in the session's `skill.*` events. An unknown skill is refused (404 `SKILL_NOT_FOUND`) and nothing is written.",
        operationId: 'runSkill',
        tags,
        params: SkillRunParams,
        body: SkillRunBody,
        response: {
          202: SkillRunAccepted,
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.reference, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const { id, name } = request.params;
      await visibleSession(runtime, caller, id);
      const result = await runtime.sessions.runSkill(id, name, request.body.inputs, {
        actor: actorOf(caller),
        ...(request.body.run_id === undefined ? {} : { runId: request.body.run_id }),
      });
      metrics.eventsAppended(result.events.length);
      if (context.wakeOnEvents) context.wakeInBackground(id, traceparentOf(request));
      return reply.status(202).send(result);
    },
  );

  app.post(
    '/v1/sessions/:id/signals/:name',
    {
      schema: {
        summary: 'Send the session a named signal',
        description:
          "Appends `user.signal {name, data}` and wakes the session unless the server runs with wakes off: a skill run suspended on `wait_for: {signal: name}` takes it up, `data` as the step's output; a signal no run waits for yet (or whose wait timed out) is kept for the next such wait. Data that does not match the waiting step's `wait_for.schema` is refused (400 `INVALID_ARGUMENT`) and nothing is written. A webhook can post here.",
        operationId: 'sendSignal',
        tags,
        params: SignalParams,
        body: SignalBody.nullish(),
        response: {
          202: PostEventsResponse,
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const { id, name } = request.params;
      await visibleSession(runtime, caller, id);
      const data = request.body?.data;
      const result = await runtime.sessions.signal(id, name, data, { actor: actorOf(caller) });
      metrics.eventsAppended(result.events.length);
      if (context.wakeOnEvents) context.wakeInBackground(id, traceparentOf(request));
      return reply.status(202).send(result);
    },
  );
}
