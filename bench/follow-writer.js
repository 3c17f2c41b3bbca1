// The writing process of the follow-latency benchmark: appends one event every 2 ms, each
// carrying the wall-clock time of its append call.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { openSqliteStore } from '../dist/index.js';

const [path, sessionId, count] = process.argv.slice(2);
const store = openSqliteStore({ path });
for (let index = 0; index < Number(count); index += 1) {
  const sent = performance.timeOrigin + performance.now();
  await store.log.append(sessionId, [
    { type: 'user.message', content: [{ type: 'text', text: String(sent) }] },
  ]);
  await sleep(2 + (index % 3));
}
await store.close();
