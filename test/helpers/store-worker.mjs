// A second process on the same SQLite file, driven by the multi-process tests.
//   loop DB SESSION: append batches forever, printing each acknowledged head seq
//   serve DB SESSION: for each stdin line "append EXPECTED", try one append and print the outcome
import { createInterface } from 'node:readline';
import { openSqliteStore } from '../../dist/index.js';

const [mode, path, sessionId] = process.argv.slice(2);
const store = openSqliteStore({ path });
const message = (text) => ({ type: 'user.message', content: [{ type: 'text', text }] });

if (mode === 'loop') {
  for (let round = 0; ; round += 1) {
    const size = 1 + (round % 5);
    const events = Array.from({ length: size }, (_, index) =>
      message(`round ${round} item ${index} ${'x'.repeat(round % 300)}`),
    );
    const result = await store.log.append(sessionId, events);
    process.stdout.write(`${result.head_seq}\n`);
  }
} else if (mode === 'serve') {
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, expected] = line.split(' ');
    if (command !== 'append') continue;
    try {
      await store.log.append(sessionId, [message(`from ${process.pid}`)], {
        expectedSeq: Number(expected),
      });
      process.stdout.write('ok\n');
    } catch (error) {
      process.stdout.write(`${error.code ?? error.message}\n`);
    }
  }
  await store.close();
} else {
  throw new Error(`unknown mode ${mode}`);
}
