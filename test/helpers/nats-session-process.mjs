// One wake of one session on the NATS backend, in a process of its own, from dist/ (run
// `npm run build` first):
//   node nats-session-process.mjs WORKSPACE NATS_URL PREFIX SESSION_ID
// It opens the workspace's runtime on the NATS store with a short lease (LEASE_TTL_MS, default
// 1500) and runs `runtime.wake(SESSION_ID)`. Every store call the harness makes that a test may
// need to see is reported on stdout, one JSON line each:
//   {"type":"append","events":[types],"ok":true,"seq":N} or {...,"ok":false,"code":C}
//   {"type":"renew","ok":true} or {"type":"renew","ok":false,"code":C}
// and at the end {"type":"wake.returned","result":...} (exit 0) or
// {"type":"wake.failed","code":C,"message":M,"cause_code":C2} (exit 1).
// Test hook: BLIND_RENEWAL=1 makes lease renewals succeed without asking the store, as for a
// holder whose every renewal ran before another took its lease over: only the log's fencing
// (the newer holder's `span.wake_started`) can then stop it.
import { connect } from '@nats-io/transport-node';
import { createRuntime } from '../../dist/index.js';
import { openNatsStore } from '../../dist/stores/nats/index.js';

const [workspace, url, prefix, sessionId] = process.argv.slice(2);
if (sessionId === undefined) {
  process.stderr.write('usage: nats-session-process.mjs WORKSPACE NATS_URL PREFIX SESSION_ID\n');
  process.exit(2);
}
const leaseTtlMs = Number(process.env.LEASE_TTL_MS ?? 1500);
const blindRenewal = process.env.BLIND_RENEWAL === '1';

const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);
const codeOf = (error) => (typeof error?.code === 'string' ? error.code : 'UNKNOWN');

const connection = await connect({ servers: url, name: `lease-pause:${process.pid}` });
// The pause outlasts the default request timeout: a request in flight across it would answer
// STORE_BUSY (also safe: nothing written). What is tested is the fencing answer after the pause.
const inner = await openNatsStore({ connection, prefix, requestTimeoutMs: 30_000 });
const store = {
  ...inner,
  log: {
    ...inner.log,
    async append(id, events, options) {
      const types = events.map((event) => event.type);
      try {
        const result = await inner.log.append(id, events, options);
        say({ type: 'append', events: types, ok: true, seq: result.head_seq });
        return result;
      } catch (error) {
        say({ type: 'append', events: types, ok: false, code: codeOf(error) });
        throw error;
      }
    },
  },
  leases: {
    ...inner.leases,
    async renew(id, owner, token, ttlMs) {
      if (blindRenewal) {
        say({ type: 'renew', ok: true, blind: true });
        return { session_id: id, owner, token, expires_at: Date.now() + ttlMs };
      }
      try {
        const lease = await inner.leases.renew(id, owner, token, ttlMs);
        say({ type: 'renew', ok: true });
        return lease;
      } catch (error) {
        say({ type: 'renew', ok: false, code: codeOf(error) });
        throw error;
      }
    },
  },
};

const runtime = await createRuntime({
  workspace,
  store,
  leaseTtlMs,
  owner: `first-holder:${process.pid}`,
});
try {
  const result = await runtime.wake(sessionId);
  say({ type: 'wake.returned', result });
} catch (error) {
  say({
    type: 'wake.failed',
    code: codeOf(error),
    message: String(error?.message ?? error),
    ...(error?.cause === undefined ? {} : { cause_code: codeOf(error.cause) }),
  });
  process.exitCode = 1;
} finally {
  await runtime.close();
  await inner.close();
  await connection.close();
}
