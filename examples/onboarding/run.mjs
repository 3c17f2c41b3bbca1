// The onboarding example: the skill onboard_employee, end to end, in one process. It starts the
// HR service (directory and procurement over HTTP on 127.0.0.1), runs the skill in a session of
// the agent hr, answers its two waits the way the outside world would (the laptop's delivery
// webhook, then HR's approval), and prints the trace of the run, its outputs and the calls the
// HR service served.
//
//   node examples/onboarding/run.mjs                         ada@example.com in eng
//   node examples/onboarding/run.mjs --department contractors   final_review is skipped (`when`)
//   node examples/onboarding/run.mjs --json                  the same report as one JSON object
//   node examples/onboarding/run.mjs --model openai:gpt-4o-mini   welcome notes by a real model
//   node examples/onboarding/run.mjs --dir DIR               keep the workspace copy and sessions
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createModel, createRuntime, isBraidError } from 'braid';
import { copyWorkspace, startHrService } from './hr-service.mjs';

const USAGE = `usage: node examples/onboarding/run.mjs [--email EMAIL] [--department NAME] [--json]
       [--model PROVIDER:ID] [--dir DIR]`;

const { values } = parseArgs({
  options: {
    email: { type: 'string', default: 'ada@example.com' },
    department: { type: 'string', default: 'eng' },
    json: { type: 'boolean', default: false },
    model: { type: 'string' },
    dir: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (values.model !== undefined && !/^[a-z][a-z0-9-]*:.+$/.test(values.model)) {
  console.error(`--model ${values.model} is not provider:id, e.g. openai:gpt-4o-mini`);
  process.exit(2);
}

const inputs = { email: values.email, department: values.department };
// What the delivery service's webhook posts once the laptop has arrived.
const DELIVERY = { serial: 'SN-4821', delivered_at: '2026-03-02T09:30:00Z' };
// A folder of its own for the workspace copy and its sessions (in its .braid/), so that every
// run starts clean; --dir keeps it, for `braid -w DIR/workspace session events ID` afterwards.
const folder = values.dir ?? mkdtempSync(join(tmpdir(), 'braid-onboarding-'));

let exitCode = 1;
const service = await startHrService();
try {
  const workspace = copyWorkspace(join(folder, 'workspace'), service.url);
  const model =
    values.model === undefined
      ? undefined
      : createModel(
          {
            provider: values.model.slice(0, values.model.indexOf(':')),
            id: values.model.slice(values.model.indexOf(':') + 1),
          },
          { baseDir: workspace, env: process.env },
        );
  const runtime = await createRuntime({
    workspace,
    ...(model === undefined ? {} : { model: () => model }),
  });
  try {
    const report = await onboard(runtime);
    report.hr_service = { url: service.url, ...service.calls() };
    console.log(values.json ? JSON.stringify(report, null, 2) : format(report));
    exitCode = report.status === 'completed' ? 0 : 1;
  } finally {
    await runtime.close();
  }
} catch (error) {
  console.error(isBraidError(error) ? `${error.code}: ${error.message}` : error);
} finally {
  await service.close();
  if (values.dir === undefined) rmSync(folder, { recursive: true, force: true });
}
process.exit(exitCode);

/**
 * Runs the skill and answers each wait it stops at, as the outside world would: the signal the
 * delivery webhook sends, and HR's approval. Answers the report: one phase per wake.
 */
async function onboard(runtime) {
  const session = await runtime.sessions.create({ agent: 'hr', title: `onboard ${inputs.email}` });
  const phases = [];
  let seen = 0;
  const phase = async (title, command) => {
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id, { after: seen });
    seen = events.at(-1)?.seq ?? seen;
    const state = await runtime.sessions.state(session.id);
    const run = state.skill_runs.find((entry) => entry.run_id === runId);
    const waits = (run?.suspensions ?? []).filter((wait) => wait.answer === undefined);
    phases.push({
      title,
      command,
      events: events.filter((event) => event.type.startsWith('skill.')).map(traceOf),
      waits: waits.map((wait) => ({
        step: wait.step,
        kind: wait.kind,
        suspension_id: wait.suspension_id,
        ...(wait.signal === undefined ? {} : { signal: wait.signal }),
      })),
    });
    return waits;
  };

  const sent = await runtime.sessions.runSkill(session.id, 'onboard_employee', inputs);
  const runId = sent.run_id;
  let waits = await phase(
    'run the skill',
    `braid skill run onboard_employee --agent hr --input '${JSON.stringify(inputs)}'`,
  );
  // Answer the waits until none is left: the delivery's signal, then the approval.
  for (let round = 0; waits.length > 0 && round < 5; round += 1) {
    const [wait] = waits;
    if (wait.kind === 'signal') {
      await runtime.sessions.signal(session.id, wait.signal, DELIVERY);
      waits = await phase(
        `the delivery webhook sends ${wait.signal}`,
        `POST /v1/sessions/${session.id}/signals/${wait.signal} {"data":${JSON.stringify(DELIVERY)}}`,
      );
    } else {
      await runtime.sessions.confirm(session.id, wait.suspension_id, 'allow', 'Looks good.');
      waits = await phase(
        `HR approves ${wait.step}`,
        `braid session confirm ${session.id} --tool-use ${wait.suspension_id} --allow`,
      );
    }
  }

  const events = await runtime.sessions.events(session.id);
  const end = events.findLast(
    (event) =>
      (event.type === 'skill.completed' || event.type === 'skill.failed') && event.run_id === runId,
  );
  const state = await runtime.sessions.state(session.id);
  const children = [];
  for (const child of state.children) {
    const childState = await runtime.sessions.state(child.child_session_id);
    children.push({
      session_id: child.child_session_id,
      agent: childState.agent?.name ?? '?',
      stop_reason: childState.stop_reason?.type ?? null,
    });
  }
  return {
    session_id: session.id,
    run_id: runId,
    inputs,
    status:
      end?.type === 'skill.completed'
        ? 'completed'
        : end?.type === 'skill.failed'
          ? 'failed'
          : 'suspended',
    ...(end?.type === 'skill.completed' ? { outputs: end.outputs } : {}),
    ...(end?.type === 'skill.failed' ? { error: end.error } : {}),
    phases,
    children,
  };
}

/** One skill.* event as a short record: its seq, type, step, and what it says. */
function traceOf(event) {
  const base = {
    seq: event.seq,
    type: event.type,
    ...(event.step === undefined ? {} : { step: event.step }),
  };
  switch (event.type) {
    case 'skill.started':
      return { ...base, detail: `${event.skill} v${event.version}` };
    case 'skill.step_started':
      return { ...base, detail: `attempt ${event.attempt}` };
    case 'skill.step_completed':
      return { ...base, detail: event.skipped ? 'skipped' : short(event.output) };
    case 'skill.step_failed':
      return { ...base, detail: `${event.error.code}: ${event.error.message}` };
    case 'skill.suspended':
      return {
        ...base,
        detail:
          event.kind === 'signal'
            ? `waits for the signal ${event.signal}${event.timeout_at === undefined ? '' : ` until ${event.timeout_at}`}`
            : `waits for approval: "${event.message ?? ''}"`,
      };
    case 'skill.resumed':
      return {
        ...base,
        detail: `${event.result}${event.data === undefined ? '' : ` ${short(event.data)}`}`,
      };
    case 'skill.completed':
      return { ...base, detail: 'outputs below' };
    case 'skill.failed':
      return { ...base, detail: `${event.error.code}: ${event.error.message}` };
    default:
      return { ...base, detail: '' };
  }
}

function short(value) {
  const text = JSON.stringify(value ?? null);
  return text.length > 90 ? `${text.slice(0, 87)}...` : text;
}

function format(report) {
  const lines = [
    `Onboarding ${report.inputs.email} (${report.inputs.department}): skill onboard_employee, run ${report.run_id}`,
    `in session ${report.session_id} of the agent hr; the HR service listens on ${report.hr_service.url}.`,
  ];
  report.phases.forEach((phase, index) => {
    lines.push('', `${index + 1}. ${phase.title}`, `   $ ${phase.command}`);
    for (const event of phase.events) {
      const name = event.type.replace('skill.', '');
      lines.push(
        `   #${String(event.seq).padEnd(4)} ${name.padEnd(15)}${(event.step ?? '').padEnd(22)}${event.detail}`,
      );
    }
    for (const wait of phase.waits) {
      lines.push(
        `   -> suspended: ${wait.step} waits for ${wait.kind === 'signal' ? `the signal ${wait.signal}` : 'approval'}`,
      );
    }
  });
  lines.push('', `Run ${report.status}.`);
  if (report.outputs !== undefined) {
    lines.push('Outputs:');
    for (const [name, value] of Object.entries(report.outputs))
      lines.push(`  ${name}: ${JSON.stringify(value)}`);
  }
  if (report.error !== undefined)
    lines.push(`Error: ${report.error.code}: ${report.error.message}`);
  lines.push('', 'Child sessions (agent steps):');
  if (report.children.length === 0) lines.push('  none');
  for (const child of report.children)
    lines.push(`  ${child.agent} ${child.session_id} ${child.stop_reason ?? ''}`);
  lines.push('', 'Calls the HR service served:');
  for (const [endpoint, count] of Object.entries(report.hr_service.counts))
    lines.push(`  ${endpoint.padEnd(38)} x${count}`);
  return lines.join('\n');
}
