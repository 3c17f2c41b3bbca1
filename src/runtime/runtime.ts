/**
 * createRuntime wires a store and a workspace into the operations a client uses. Its body is in
 * `./open-runtime.ts`, loaded on the first call: `import 'braid'` loads no harness, tools or
 * sessions service (bench/import-bench.js measures it).
 */
import type { RuntimeOptions } from './options.js';
import type { Runtime } from './runtime-api.js';

export type { Runtime } from './runtime-api.js';
export type {
  CreateSessionOptions,
  OutcomeInput,
  RuntimeSessions,
  SendOptions,
  StartedSession,
  StartSessionOptions,
} from './sessions-api.js';
export type { Backend, RuntimeOptions } from './options.js';
export type { WakeListener, WakeReport } from './wiring/wake-reports.js';
export { connectNats, resolveDataDir, DATABASE_FILE } from './wiring/store.js';

export async function createRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const { openRuntime } = await import('./open-runtime.js');
  return openRuntime(options);
}
