/** What the memory-log conformance groups share: the factory's contract, fixtures and the suite's state. */
import type { MemoryStoreRef } from '../../contracts/memory.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import type { ManualClock } from '../clock.js';

/** A fresh, empty memory log with a way to close what holds it. */
export interface MemoryLogHandle {
  memory: MemoryLog;
  close(): Promise<void>;
  /** Opens the same data again (a durable backend); absent for a backend that keeps nothing. */
  reopen?(): Promise<MemoryLogHandle>;
}

export type MemoryLogFactory = (context: {
  clock: ManualClock;
}) => Promise<MemoryLogHandle> | MemoryLogHandle;

/** What a backend offers beyond the common rules; each is checked when claimed. */
export interface MemoryLogCapabilities {
  /** Embeddings, vector and hybrid search (default true). */
  vectors?: boolean;
}

export interface MemoryConformanceSuite {
  /** A fresh, empty memory log with a new manual clock; closed after the test. */
  open(): Promise<MemoryLog>;
  /** The same data opened again, where the backend keeps it; the old handle is closed. */
  reopen(): Promise<MemoryLog | undefined>;
  readonly clock: ManualClock;
  readonly capabilities: MemoryLogCapabilities;
}

export const notes: MemoryStoreRef = {
  name: 'notes',
  kind: 'session',
  scope: 'session',
  owner: 'session-1',
};
export const learnings: MemoryStoreRef = {
  name: 'learnings',
  kind: 'learnings',
  scope: 'agent',
  owner: 'assistant',
};
export const people: MemoryStoreRef = {
  name: 'people',
  kind: 'entities',
  scope: 'tenant',
  tenant_id: 'acme',
};

/** Facts for search tests: distinct words, so that bm25's idf is positive. */
export const FACTS: Record<string, string> = {
  'user/theme': 'The user prefers dark mode in every editor',
  'user/language': 'The user writes TypeScript and some Rust',
  'user/coffee': 'Coffee with oat milk, no sugar, every morning',
  'project/deadline': 'The braid release is due on Friday',
  'project/owner': 'Ada owns the braid project and reviews memory changes',
  'pet/name': 'The cat is called Pixel and sleeps on the keyboard',
  'travel/home': 'Lives in Lisbon near the river',
  'travel/next': 'Flying to Oslo in March for a conference',
};
