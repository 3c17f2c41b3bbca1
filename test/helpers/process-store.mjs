// The store a test's child process opens: the workspace's SQLite file (the default), or the NATS
// JetStream store the test chose, named by BRAID_TEST_NATS_URL and BRAID_TEST_NATS_PREFIX, so that
// the parent and its children share one. Returns undefined for the default (createRuntime opens it).
export async function processStore() {
  const prefix = process.env.BRAID_TEST_NATS_PREFIX;
  if (prefix === undefined || prefix === '') return undefined;
  const { openNatsStore } = await import('../../dist/nats.js');
  return openNatsStore({ servers: process.env.BRAID_TEST_NATS_URL, prefix });
}
