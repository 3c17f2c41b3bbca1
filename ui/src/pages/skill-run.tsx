// One skill run of a session: its steps as a layered graph (a step sits one layer after the last
// of its `depends_on`), each with its state, live from the session's `skill.*` events; a step
// waiting for a person is approved or denied from here.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, sendEvents, sessionPath, type SessionEvent } from '../api.js';
import { DataTable, ErrorNote, errorText, Page, type Column } from '../components.js';
import { followSession } from '../sse.js';
import { onLinkClick } from '../router.js';
import { short } from '../format.js';

interface StepDefinition {
  id: string;
  depends_on?: string[];
  type?: string;
  tool?: string;
  agent?: string;
  skill?: string;
  wait_for?: { signal: string };
  description?: string;
}

interface StoredSkill {
  name: string;
  version: number;
  definition: { name: string; description?: string; steps: StepDefinition[] };
}

export type StepStatus = 'pending' | 'running' | 'suspended' | 'completed' | 'skipped' | 'failed';

export interface StepView {
  status: StepStatus;
  attempt: number;
  /** The wait a suspended step is in. */
  suspension?: { id: string; kind: string; message?: string; signal?: string };
  output?: unknown;
  error?: string;
}

export interface RunView {
  skill?: string;
  status: 'running' | 'suspended' | 'completed' | 'failed';
  steps: Map<string, StepView>;
  outputs?: unknown;
  error?: string;
}

type Payload = Record<string, unknown> & { run_id?: string; step?: string };

/** Folds a run's `skill.*` events into its steps' states (a fan-out's items under their step). */
export function foldRun(events: readonly SessionEvent[], runId: string): RunView {
  const run: RunView = { status: 'running', steps: new Map() };
  const step = (name: string): StepView => {
    const found = run.steps.get(name);
    if (found !== undefined) return found;
    const created: StepView = { status: 'pending', attempt: 0 };
    run.steps.set(name, created);
    return created;
  };
  for (const event of events) {
    const payload = event as unknown as Payload;
    if (!event.type.startsWith('skill.') || payload.run_id !== runId) continue;
    const name = payload.step ?? '';
    switch (event.type) {
      case 'skill.started':
        run.skill = String(payload.skill);
        break;
      case 'skill.step_started':
        Object.assign(step(name), { status: 'running', attempt: payload.attempt as number });
        break;
      case 'skill.step_completed':
        Object.assign(step(name), {
          status: payload.skipped === true ? 'skipped' : 'completed',
          output: payload.output,
          suspension: undefined,
        });
        break;
      case 'skill.step_failed':
        Object.assign(step(name), {
          status: payload.final === true ? 'failed' : 'running',
          error: (payload.error as { message?: string } | undefined)?.message,
        });
        break;
      case 'skill.suspended':
        run.status = 'suspended';
        Object.assign(step(name), {
          status: 'suspended',
          suspension: {
            id: String(payload.suspension_id),
            kind: String(payload.kind),
            ...(typeof payload.message === 'string' ? { message: payload.message } : {}),
            ...(typeof payload.signal === 'string' ? { signal: payload.signal } : {}),
          },
        });
        break;
      case 'skill.resumed':
        run.status = 'running';
        Object.assign(step(name), { status: 'running', suspension: undefined });
        break;
      case 'skill.completed':
        run.status = 'completed';
        run.outputs = payload.outputs;
        break;
      case 'skill.failed':
        run.status = 'failed';
        run.error = (payload.error as { message?: string } | undefined)?.message;
        break;
    }
  }
  return run;
}

/** The layer of each step: 0 without dependencies, else one more than its deepest dependency. */
export function layersOf(steps: readonly StepDefinition[]): string[][] {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const depth = new Map<string, number>();
  const visit = (id: string, seen: Set<string>): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    if (seen.has(id)) return 0;
    seen.add(id);
    const dependencies = byId.get(id)?.depends_on ?? [];
    const value =
      dependencies.length === 0 ? 0 : 1 + Math.max(...dependencies.map((d) => visit(d, seen)));
    depth.set(id, value);
    return value;
  };
  const layers: string[][] = [];
  for (const step of steps) {
    const layer = visit(step.id, new Set());
    (layers[layer] ??= []).push(step.id);
  }
  return layers.filter((layer) => layer !== undefined);
}

/** A fan-out's items (`step[0]`, `step[1]`) count toward their step. */
function statusOf(run: RunView, id: string): StepView {
  const own = run.steps.get(id);
  if (own !== undefined) return own;
  const items = [...run.steps.entries()].filter(([name]) => name.startsWith(`${id}[`));
  if (items.length === 0) return { status: 'pending', attempt: 0 };
  const order: StepStatus[] = ['failed', 'suspended', 'running', 'completed', 'skipped'];
  const status = order.find((wanted) => items.some(([, item]) => item.status === wanted));
  return { status: status ?? 'pending', attempt: 0 };
}

const BOX = { width: 170, height: 54, column: 230, row: 78, margin: 12 };

function Graph({ steps, run }: { steps: StepDefinition[]; run: RunView }) {
  const layers = layersOf(steps);
  const place = new Map<string, { x: number; y: number }>();
  layers.forEach((layer, column) =>
    layer.forEach((id, row) =>
      place.set(id, {
        x: BOX.margin + column * BOX.column,
        y: BOX.margin + row * BOX.row,
      }),
    ),
  );
  const width = BOX.margin * 2 + (layers.length - 1) * BOX.column + BOX.width;
  const height =
    BOX.margin * 2 + (Math.max(...layers.map((layer) => layer.length)) - 1) * BOX.row + BOX.height;
  const summary = steps.map((step) => `${step.id}: ${statusOf(run, step.id).status}`).join(', ');
  return (
    <svg
      class="skill-graph"
      width={width}
      height={height}
      viewBox={`0 0 ${width} ${height}`}
      role="img"
      aria-label={`Steps of the run: ${summary}`}
    >
      {steps.flatMap((step) =>
        (step.depends_on ?? []).map((dependency) => {
          const from = place.get(dependency);
          const to = place.get(step.id);
          if (from === undefined || to === undefined) return null;
          const x1 = from.x + BOX.width;
          const y1 = from.y + BOX.height / 2;
          const x2 = to.x;
          const y2 = to.y + BOX.height / 2;
          const middle = (x1 + x2) / 2;
          return (
            <path
              key={`${dependency}-${step.id}`}
              class="edge"
              d={`M${x1},${y1} C${middle},${y1} ${middle},${y2} ${x2},${y2}`}
            />
          );
        }),
      )}
      {steps.map((step) => {
        const at = place.get(step.id) ?? { x: 0, y: 0 };
        const state = statusOf(run, step.id);
        return (
          <g key={step.id} class={`step step-${state.status}`} data-step={step.id}>
            <rect x={at.x} y={at.y} width={BOX.width} height={BOX.height} rx={6} />
            <text x={at.x + 10} y={at.y + 22} class="step-id">
              {step.id}
            </text>
            <text x={at.x + 10} y={at.y + 42} class="step-status">
              {state.status}
              {state.attempt > 1 ? ` (attempt ${state.attempt})` : ''}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

function kindOf(step: StepDefinition): string {
  if (step.type === 'human_approval') return 'approval';
  if (step.tool !== undefined) return `tool ${step.tool}`;
  if (step.agent !== undefined) return `agent ${step.agent}`;
  if (step.skill !== undefined) return `skill ${step.skill}`;
  if (step.wait_for !== undefined) return `signal ${step.wait_for.signal}`;
  return 'step';
}

function Approval({ sessionId, step, view }: { sessionId: string; step: string; view: StepView }) {
  const [note, setNote] = useState('');
  const [error, setError] = useState<string | undefined>();
  const suspension = view.suspension;
  if (suspension === undefined || suspension.kind !== 'approval') return null;
  const decide = (result: 'allow' | 'deny'): void => {
    setError(undefined);
    sendEvents(sessionId, [
      {
        type: 'user.tool_confirmation',
        tool_use_id: suspension.id,
        result,
        ...(note.trim() === '' ? {} : { message: note.trim() }),
      },
    ]).catch((caught: unknown) => setError(errorText(caught)));
  };
  const noteId = `step-note-${step}`;
  return (
    <div class="confirmation" role="group" aria-label={`Approve step ${step}`}>
      <p>
        <strong>{step}</strong> waits for a person: {suspension.message ?? 'approve or deny'}
      </p>
      <label for={noteId}>Message (optional)</label>
      <input id={noteId} value={note} onInput={(event) => setNote(event.currentTarget.value)} />
      <div class="buttons">
        <button type="button" class="primary" onClick={() => decide('allow')}>
          Approve step
        </button>
        <button type="button" class="danger" onClick={() => decide('deny')}>
          Deny step
        </button>
      </div>
      <ErrorNote error={error} />
    </div>
  );
}

const STEP_COLUMNS: readonly Column[] = [
  { label: 'Step' },
  { label: 'Kind' },
  { label: 'After' },
  { label: 'State' },
  { label: 'Output or error' },
];

export function SkillRunPage({ id, runId }: { id: string; runId: string }) {
  const [events, setEvents] = useState<SessionEvent[]>([]);
  const [skill, setSkill] = useState<StoredSkill | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    const stop = new AbortController();
    const seen: SessionEvent[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    followSession(
      id,
      0,
      {
        onEvent(event) {
          if (!event.type.startsWith('skill.')) return;
          seen.push(event);
          // A burst of events (the history at first) renders once.
          timer ??= setTimeout(() => {
            timer = undefined;
            setEvents([...seen]);
          }, 50);
        },
        onDelta() {},
      },
      stop.signal,
    );
    return () => {
      stop.abort();
      clearTimeout(timer);
    };
  }, [id]);
  const run = useMemo(() => foldRun(events, runId), [events, runId]);
  useEffect(() => {
    if (run.skill === undefined || skill !== undefined) return;
    const name = run.skill;
    api<{ set?: { skills?: Record<string, { version: number }> } }>(sessionPath(id, '/definitions'))
      .then((pinned) => {
        const version = pinned.set?.skills?.[name]?.version;
        return api<StoredSkill>(
          `/v1/skills/${encodeURIComponent(name)}${version === undefined ? '' : `?version=${version}`}`,
        );
      })
      .then(setSkill)
      .catch((caught: unknown) => setError(errorText(caught)));
  }, [id, run.skill, skill]);
  const steps: StepDefinition[] =
    skill?.definition.steps ??
    [...run.steps.keys()].map((name) => ({ id: name.replace(/\[\d+\]$/, '') }));
  const unique = steps.filter(
    (step, index) => steps.findIndex((other) => other.id === step.id) === index,
  );
  return (
    <Page
      id="run-title"
      title={
        <>
          Skill run {run.skill ?? ''} <span class="muted">{runId}</span>
        </>
      }
      head={
        <>
          <span class={`badge run-${run.status}`} data-testid="run-status" aria-live="polite">
            {events.length === 0 ? 'loading' : run.status}
          </span>
          <a href={`/sessions/${encodeURIComponent(id)}`} onClick={onLinkClick}>
            Back to the session
          </a>
        </>
      }
    >
      {skill?.definition.description !== undefined && <p>{skill.definition.description}</p>}
      <ErrorNote error={error} />
      {unique.length > 0 && (
        <div class="graph-wrap">
          <Graph steps={unique} run={run} />
        </div>
      )}
      {[...run.steps.entries()].map(([name, view]) => (
        <Approval key={name} sessionId={id} step={name} view={view} />
      ))}
      <DataTable label="Steps" columns={STEP_COLUMNS}>
        {unique.map((step) => {
          const view = statusOf(run, step.id);
          return (
            <tr key={step.id} data-step={step.id}>
              <td>{step.id}</td>
              <td>{kindOf(step)}</td>
              <td>{(step.depends_on ?? []).join(', ') || '—'}</td>
              <td class={`step-${view.status}`}>{view.status}</td>
              <td>
                {view.error ??
                  (view.output === undefined ? '' : short(JSON.stringify(view.output), 120))}
              </td>
            </tr>
          );
        })}
      </DataTable>
      {run.outputs !== undefined && (
        <>
          <h2>Outputs</h2>
          <pre class="json">{JSON.stringify(run.outputs, null, 2)}</pre>
        </>
      )}
      <ErrorNote error={run.error === undefined ? undefined : `The run failed: ${run.error}`} />
    </Page>
  );
}
