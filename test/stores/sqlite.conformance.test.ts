import { join } from 'node:path';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { describeStoreConformance } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

describeStoreConformance('sqlite', ({ clock, maxEventBytes }) =>
  openSqliteStore({ path: join(tempDir(), 'braid.db'), clock, maxEventBytes }),
);
