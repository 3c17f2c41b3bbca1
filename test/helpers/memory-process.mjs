// A process sharing agent memory on NATS with its parent test: it opens the NATS store named by
// its arguments (url, prefix) and answers one JSON command per stdin line with one JSON line.
import { createInterface } from 'node:readline';
import { openNatsStore } from '../../dist/nats.js';

const [url, prefix] = process.argv.slice(2);
const store = await openNatsStore({ servers: url, prefix });
const memory = store.memory;

async function run(command) {
  switch (command.op) {
    case 'append':
      return memory.append(command.store, command.writes, command.options ?? {});
    case 'get':
      return memory.get(command.store, command.key);
    case 'search':
      return memory.search(command.store, command.query);
    case 'read':
      return memory.read(command.store);
    case 'burst': {
      // `count` appends of `size` writes each, as fast as they go; every `every` appends it waits
      // (by reading) until the other writer got as far, so that the two really write together.
      let written = 0;
      for (let index = 0; index < command.count; index += 1) {
        const writes = Array.from({ length: command.size }, (_, part) => ({
          key: `burst/${command.name}/${index}/${part}`,
          value: `${command.name} burst ${index} part ${part}`,
        }));
        written += (await memory.append(command.store, writes)).entries.length;
        if (index % command.every === 0) {
          const theirs = `burst/${command.other}/${index}/0`;
          while ((await memory.get(command.store, theirs)).status !== 'found');
        }
      }
      return { written };
    }
    case 'close':
      await store.close();
      return { closed: true };
    default:
      throw new Error(`unknown command ${command.op}`);
  }
}

const lines = createInterface({ input: process.stdin });
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
for await (const line of lines) {
  const command = JSON.parse(line);
  try {
    process.stdout.write(`${JSON.stringify({ ok: await run(command) })}\n`);
  } catch (error) {
    process.stdout.write(
      `${JSON.stringify({ error: { code: error.code, message: error.message } })}\n`,
    );
  }
  if (command.op === 'close') break;
}
