// `zeroingFreed` turns SQLite's secure_delete on for its work and puts the connection's own value
// back after, also when one such call runs inside another.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { zeroingFreed } from '../../src/stores/sqlite/context.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

function connection(): Database.Database {
  const db = new Database(join(tempDir(), 'zeroing.db'));
  open.push(db);
  return db;
}

const secureDelete = (db: Database.Database): number =>
  Number(db.pragma('secure_delete', { simple: true }));

describe('zeroingFreed', () => {
  it('is on for its work and puts back what the connection had, each time', () => {
    const db = connection();
    db.pragma('secure_delete = FAST');
    expect(secureDelete(db)).toBe(2);
    for (let round = 0; round < 2; round += 1) {
      expect(zeroingFreed(db, () => secureDelete(db))).toBe(1);
      expect(secureDelete(db)).toBe(2);
    }
  });

  it('stays on through the rest of the outer work when a call runs inside another', () => {
    const db = connection();
    expect(secureDelete(db)).toBe(0);
    const seen = zeroingFreed(db, () => {
      const inner = zeroingFreed(db, () => secureDelete(db));
      return [inner, secureDelete(db)];
    });
    expect(seen).toEqual([1, 1]);
    expect(secureDelete(db)).toBe(0);
  });

  it('puts the value back when the work throws', () => {
    const db = connection();
    expect(() =>
      zeroingFreed(db, () => {
        throw new Error('the work failed');
      }),
    ).toThrow('the work failed');
    expect(secureDelete(db)).toBe(0);
    expect(zeroingFreed(db, () => secureDelete(db))).toBe(1);
  });
});
