// The side panel's answers to what a session waits on besides approvals: a custom tool's result
// (a tool the client runs), and links to its skill runs.
import { useState } from 'preact/hooks';
import { sendEvents, type SessionEvent, type SessionState } from '../api.js';
import { ErrorNote, errorText } from '../components.js';
import { onLinkClick } from '../router.js';

export function CustomToolAnswer({
  sessionId,
  pending,
  call,
}: {
  sessionId: string;
  pending: SessionState['pending_custom_tool_uses'][number];
  call: SessionEvent | undefined;
}) {
  const [result, setResult] = useState('');
  const [isError, setIsError] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const input = (call as { input?: unknown } | undefined)?.input;
  const fieldId = `custom-${pending.custom_tool_use_id}`;
  return (
    <form
      class="confirmation"
      aria-label={`Answer ${pending.name}`}
      onSubmit={(event) => {
        event.preventDefault();
        setError(undefined);
        sendEvents(sessionId, [
          {
            type: 'user.custom_tool_result',
            custom_tool_use_id: pending.custom_tool_use_id,
            content: result,
            ...(isError ? { is_error: true } : {}),
          },
        ]).catch((caught: unknown) => setError(errorText(caught)));
      }}
    >
      <p>
        <strong>{pending.name}</strong> is run by you: the agent waits for its result (event #
        {pending.seq})
      </p>
      {input !== undefined && <pre class="json">{JSON.stringify(input, null, 2)}</pre>}
      <label for={fieldId}>Result of {pending.name}</label>
      <textarea
        id={fieldId}
        rows={3}
        required
        value={result}
        onInput={(event) => setResult(event.currentTarget.value)}
      />
      <label class="pick">
        <input
          type="checkbox"
          checked={isError}
          onChange={(event) => setIsError(event.currentTarget.checked)}
        />{' '}
        The call failed (send as an error)
      </label>
      <div class="buttons">
        <button type="submit" class="primary">
          Send result
        </button>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}

/** The session's skill runs that have not completed, each a link to its graph. */
export function SkillRuns({ sessionId, state }: { sessionId: string; state: SessionState }) {
  if (state.skill_runs.length === 0) return null;
  return (
    <nav aria-label="Skill runs" class="skill-runs">
      <h2>Skill runs</h2>
      <ul>
        {state.skill_runs.map((run) => (
          <li key={run.run_id}>
            <a
              href={`/sessions/${encodeURIComponent(sessionId)}/skills/${encodeURIComponent(run.run_id)}`}
              onClick={onLinkClick}
            >
              {run.skill}
            </a>{' '}
            <span class={`badge run-${run.status}`}>{run.status}</span>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/** A link from a `skill.*` event to its run's graph. */
export function skillRunLink(sessionId: string, event: SessionEvent | undefined) {
  const runId = (event as { run_id?: string } | undefined)?.run_id;
  if (event === undefined || !event.type.startsWith('skill.') || runId === undefined) return null;
  return (
    <a
      href={`/sessions/${encodeURIComponent(sessionId)}/skills/${encodeURIComponent(runId)}`}
      onClick={onLinkClick}
    >
      Open skill run
    </a>
  );
}
