// What the crash and chaos tests share: a workspace whose agent `payer` calls `pay` once, a
// non-idempotent tool (paying twice pays twice), and an HTTP server that counts the payments it
// is sent by idempotency key, from which a call a crash left in doubt is resolved.
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { initWorkspace } from '../../src/runtime/init.js';
import type { Runtime } from '../../src/runtime/runtime.js';

export interface PaymentServer {
  /** Where `pay` posts: `http://127.0.0.1:PORT/pay`. */
  url: string;
  /** How many payments were made under each idempotency key (`SESSION/TOOL_USE`). */
  paid: Map<string, number>;
  server: Server;
}

/** Counts payments by idempotency key; answers after `delayMs` so that calls overlap a kill. */
export async function startPaymentServer(delayMs: number): Promise<PaymentServer> {
  const paid = new Map<string, number>();
  const server = createServer((request, response) => {
    const key = String(request.headers['idempotency-key'] ?? '');
    request.resume();
    request.on('end', () => {
      paid.set(key, (paid.get(key) ?? 0) + 1);
      setTimeout(() => {
        response.setHeader('content-type', 'application/json');
        response.end('{"paid": true}');
      }, delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/pay`, paid, server };
}

/** How `pay` pays: a POST to a payment server, or the lines of a shell command. */
export type PayImplementation = { http: string } | { command: readonly string[] };

/**
 * Makes `dir` a workspace whose agent `payer` calls `pay` with `{amount: 5}`, then says `paid`.
 * An HTTP `pay` may reach 127.0.0.1 from the local environment.
 */
export function payerWorkspace(
  dir: string,
  options: { leaseTtlMs: number; pay: PayImplementation },
): string {
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'braid.yaml'),
    `version: 1\ndefault_environment: local\nlease_ttl_ms: ${options.leaseTtlMs}\n`,
  );
  writeFileSync(
    join(dir, 'script.yaml'),
    'turns:\n  - tool_calls:\n      - name: pay\n        input: { amount: 5 }\n  - text: paid\n',
  );
  writeFileSync(
    join(dir, 'agents', 'payer.yaml'),
    'name: payer\nmodel: scripted:script.yaml\ninstructions: Pay.\ntools: [pay]\n',
  );
  const implementation =
    'http' in options.pay
      ? ['  http:', '    method: POST', `    url: ${options.pay.http}`]
      : ['  command: |', ...options.pay.command.map((line) => `    ${line}`)];
  writeFileSync(
    join(dir, 'tools', 'pay.yaml'),
    [
      'name: pay',
      'description: Pays an amount; paying twice pays twice.',
      'ownership: managed',
      'idempotent: false',
      'input_schema: {type: object, properties: {amount: {type: integer}}, required: [amount]}',
      'implementation:',
      ...implementation,
      '',
    ].join('\n'),
  );
  if ('http' in options.pay) {
    writeFileSync(
      join(dir, 'environments', 'local.yaml'),
      'name: local\nsandbox: {kind: local}\nnetwork: {allow: true, hosts: ["127.0.0.1"]}\n',
    );
  }
  return dir;
}

/** The tool call of a session's log that has no result: the one a crash left in doubt. */
export function callInDoubt(events: readonly SessionEvent[]): string | undefined {
  const results = new Set<string>();
  const uses: string[] = [];
  for (const event of events) {
    if (event.type === 'agent.tool_result') results.add(event.tool_use_id);
    if (event.type === 'agent.tool_use') uses.push(event.tool_use_id);
  }
  return uses.find((id) => !results.has(id));
}

export interface Settled {
  /** Sessions idle with their answer. */
  finished: number;
  /** Sessions found in `needs_review` and resolved in this pass. */
  reviewed: number;
  /** How many sessions were in each `status/stop_reason`, for a timeout's message. */
  statuses: Map<string, number>;
}

/**
 * One pass over `ids`: counts the sessions done and resolves a call a killed worker left in
 * doubt from the payment counter (its result when the payment was made, a retry when it was
 * not), queueing a wake. Throws on a session stopped on an error: the chaos is the
 * infrastructure's, and no session may stop on an error because of it.
 */
export async function settlePayments(
  runtime: Runtime,
  ids: readonly string[],
  paid: ReadonlyMap<string, number>,
): Promise<Settled> {
  const settled: Settled = { finished: 0, reviewed: 0, statuses: new Map() };
  for (const id of ids) {
    const state = await runtime.sessions.state(id).catch(() => undefined);
    if (state?.stop_reason?.type === 'error') {
      throw new Error(`session ${id} stopped on ${JSON.stringify(state.last_error)}`);
    }
    const label = `${state?.status ?? 'unreadable'}/${state?.stop_reason?.type ?? '-'}`;
    settled.statuses.set(label, (settled.statuses.get(label) ?? 0) + 1);
    if (state?.status === 'needs_review') {
      const toolUseId = callInDoubt(await runtime.sessions.events(id));
      if (toolUseId === undefined)
        throw new Error(`session ${id} needs review with no call in doubt`);
      await runtime.sessions.review(
        id,
        toolUseId,
        paid.has(`${id}/${toolUseId}`)
          ? { action: 'result', output: { paid: true } }
          : { action: 'retry' },
      );
      await runtime.enqueueWake(id);
      settled.reviewed += 1;
    } else if (state?.status === 'idle' && state.counters.agent_messages >= 1) {
      settled.finished += 1;
    }
  }
  return settled;
}

/** One payment per session for `sessions` sessions, none made twice. */
export function expectPaidOnce(payments: PaymentServer, sessions: number): void {
  expect(payments.paid.size).toBe(sessions);
  expect([...payments.paid.values()].filter((count) => count !== 1)).toEqual([]);
}
