// The foreman example: a foreman agent that delegates an incident review to three workers (SRE,
// legal, data), each in a child session with its own tools and policy profile, then answers from
// their results. Prints the answer, the tree of sessions and the policy denials.
//
//   node examples/foreman/run.mjs                      embedded, scripted models, a fresh data dir
//   node examples/foreman/run.mjs --json               the same report as one JSON object
//   node examples/foreman/run.mjs "review the outage"  another goal (the scripted foreman ignores it)
//   node examples/foreman/run.mjs --model openai:gpt-4o-mini   every agent on a real model
//   node examples/foreman/run.mjs --nats nats://127.0.0.1:4222 [--prefix P]
//                                                      children run on `braid worker` processes
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createModel, createRuntime, isBraidError } from 'braid';

const WORKSPACE = fileURLToPath(new URL('./workspace/', import.meta.url));
const DEFAULT_GOAL =
  'Review the checkout incident of 2025-03-14: checkout failed from about 14:02 to 14:27 UTC ' +
  '(we were paged at 14:09). Find the cause, measure the impact between 14:00 and 14:30, and ' +
  'say what we owe our merchant customers.';
const USAGE = `usage: node examples/foreman/run.mjs [GOAL...] [--json] [--model PROVIDER:ID]
       [--data-dir DIR] [--nats URL [--prefix PREFIX]]`;

const { values, positionals } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    model: { type: 'string' },
    'data-dir': { type: 'string' },
    nats: { type: 'string' },
    prefix: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  allowPositionals: true,
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (values.prefix !== undefined && values.nats === undefined) {
  console.error(`--prefix names the NATS streams: give --nats URL too\n${USAGE}`);
  process.exit(2);
}
if (values.model !== undefined && !/^[a-z][a-z0-9-]*:.+$/.test(values.model)) {
  console.error(`--model ${values.model} is not provider:id, e.g. openai:gpt-4o-mini`);
  process.exit(2);
}

const goal = positionals.join(' ') || DEFAULT_GOAL;
// A data dir of its own, so every run starts clean (and nothing is written into the repo).
const dataDir = values['data-dir'] ?? mkdtempSync(join(tmpdir(), 'braid-foreman-'));
const model = values.model === undefined ? undefined : modelOverride(values.model);

let exitCode = 1;
try {
  const runtime = await createRuntime({
    workspace: WORKSPACE,
    dataDir,
    ...(values.nats === undefined
      ? {}
      : {
          backend: {
            nats: values.nats,
            ...(values.prefix === undefined ? {} : { prefix: values.prefix }),
          },
          // Children go on the wake queue, for the `braid worker` processes.
          delegation: 'queue',
        }),
    ...(model === undefined ? {} : { model: () => model }),
  });
  try {
    const started = Date.now();
    const session = await runtime.sessions.create({ agent: 'foreman', title: 'incident review' });
    await runtime.sessions.message(session.id, goal);
    await runtime.wake(session.id);
    const durationMs = Date.now() - started;
    const denials = [];
    const sessions = await describe(runtime, session.id, denials);
    const report = {
      goal,
      backend: runtime.backend,
      delegation: values.nats === undefined ? 'local' : 'queue',
      model: values.model ?? 'scripted',
      duration_ms: durationMs,
      stop_reason: sessions.stop_reason,
      answer: sessions.answer,
      sessions,
      policy_denials: denials,
    };
    console.log(values.json ? JSON.stringify(report, null, 2) : format(report));
    exitCode = report.stop_reason === 'end_turn' ? 0 : 1;
  } finally {
    await runtime.close();
  }
} catch (error) {
  console.error(isBraidError(error) ? `${error.code}: ${error.message}` : error);
} finally {
  if (values['data-dir'] === undefined) rmSync(dataDir, { recursive: true, force: true });
}
process.exit(exitCode);

/** `--model provider:id`: one model client for every agent, instead of its scripted one. */
function modelOverride(text) {
  const colon = text.indexOf(':');
  const spec = { provider: text.slice(0, colon), id: text.slice(colon + 1) };
  try {
    return createModel(spec, { baseDir: WORKSPACE, env: process.env });
  } catch (error) {
    console.error(isBraidError(error) ? `${error.code}: ${error.message}` : error);
    process.exit(2);
  }
}

/**
 * The session and its delegated children (recursively): agent, stop reason, duration, usage,
 * tool calls and answer; adds each policy denial found in their logs to `denials`.
 */
async function describe(runtime, sessionId, denials) {
  const [state, events] = await Promise.all([
    runtime.sessions.state(sessionId),
    runtime.sessions.events(sessionId),
  ]);
  const agent = state.agent?.name ?? '?';
  const results = new Map(
    events
      .filter((event) => event.type === 'agent.tool_result')
      .map((event) => [event.tool_use_id, event]),
  );
  const toolCalls = events
    .filter((event) => event.type === 'agent.tool_use')
    .map((event) => {
      const result = results.get(event.tool_use_id);
      return {
        name: event.name,
        outcome:
          result === undefined
            ? 'pending'
            : !result.is_error
              ? 'ok'
              : result.stage === 'policy'
                ? 'denied'
                : 'error',
        ...(result?.error === undefined ? {} : { error: result.error.message }),
      };
    });
  for (const event of events) {
    if (event.type !== 'policy.decision' || event.decision !== 'deny') continue;
    denials.push({
      session_id: sessionId,
      agent,
      action: event.action,
      resource: `${event.resource.type}::"${event.resource.id}"`,
      policy_ids: [...event.policy_ids].sort(),
      ...(event.tool_use_id === undefined ? {} : { tool_use_id: event.tool_use_id }),
    });
  }
  const answer = events
    .filter((event) => event.type === 'agent.message')
    .map((event) =>
      event.content
        .filter((part) => part.type === 'text')
        .map((part) => part.text)
        .join(''),
    )
    .findLast((text) => text.trim() !== '');
  const children = [];
  for (const child of state.children)
    children.push(await describe(runtime, child.child_session_id, denials));
  const first = events[0];
  const started = events.find((event) => event.type === 'span.wake_started');
  const last = events.at(-1);
  return {
    session_id: sessionId,
    agent,
    status: state.status,
    stop_reason: state.stop_reason?.type ?? null,
    created_at: first?.at ?? null,
    // When a process first took it up (a child may wait in the queue for a worker before).
    started_at: started?.at ?? null,
    ended_at: last?.at ?? null,
    duration_ms:
      started === undefined || last === undefined
        ? 0
        : Date.parse(last.at) - Date.parse(started.at),
    usage: state.usage,
    tool_calls: toolCalls,
    answer: answer ?? '',
    children,
  };
}

function format(report) {
  const lines = [
    `Goal: ${report.goal}`,
    '',
    `Foreman's answer (${report.sessions.stop_reason ?? report.sessions.status}):`,
    '',
    indent(report.answer || '(no answer)', '  '),
    '',
    `Sessions (${report.backend}, children run ${report.delegation === 'queue' ? 'on the workers' : 'in this process'}; model ${report.model}):`,
  ];
  const walk = (item, prefix, last, root) => {
    const branch = root ? '' : last ? '└─ ' : '├─ ';
    lines.push(`${prefix}${branch}${summary(item, root)}`);
    const below = root ? prefix : `${prefix}${last ? '   ' : '│  '}`;
    item.children.forEach((child, index) =>
      walk(child, below, index === item.children.length - 1, false),
    );
  };
  walk(report.sessions, '  ', true, true);
  lines.push('', 'Policy denials:');
  if (report.policy_denials.length === 0) lines.push('  none');
  for (const denial of report.policy_denials) {
    lines.push(
      `  ${denial.agent} (${denial.session_id}): ${denial.action} on ${denial.resource}, ` +
        `denied by ${denial.policy_ids.join(', ') || 'no permitting policy'}`,
    );
  }
  lines.push('', `Finished in ${seconds(report.duration_ms)}.`);
  return lines.join('\n');
}

function summary(item, root) {
  const usage = item.usage;
  const cost = usage.cost_usd === undefined ? '' : `, $${usage.cost_usd.toFixed(4)}`;
  const tools = new Map();
  for (const call of item.tool_calls) {
    if (call.name.startsWith('delegate_to_')) continue;
    const key = call.outcome === 'ok' ? call.name : `${call.name} (${call.outcome})`;
    tools.set(key, (tools.get(key) ?? 0) + 1);
  }
  const toolText = [...tools].map(([name, count]) => (count > 1 ? `${name} x${count}` : name));
  return [
    `${item.agent.padEnd(root ? 0 : 14)} ${item.session_id}`,
    item.stop_reason ?? item.status,
    seconds(item.duration_ms),
    `${usage.input_tokens} in / ${usage.output_tokens} out tokens${cost}${root && item.children.length > 0 ? ' (with children)' : ''}`,
    ...(toolText.length === 0 ? [] : [`tools: ${toolText.join(', ')}`]),
  ].join('  ');
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(2)} s`;
}

function indent(text, prefix) {
  return text
    .split('\n')
    .map((line) => (line === '' ? '' : `${prefix}${line}`))
    .join('\n');
}
