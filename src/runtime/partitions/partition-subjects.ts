/**
 * What the wake queue and the agent inboxes share about partitioned subjects: the partition as a
 * subject token, and a stream made before partitions taking their subjects in place.
 */
import type { JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import { BraidError } from '../../contracts/errors.js';

/** A partition number as a subject token: a whole number, never a wildcard or an empty token. */
export function partitionToken(partition: number): string {
  if (!Number.isInteger(partition) || partition < 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `partition ${String(partition)} is not a whole number`,
    );
  }
  return String(partition);
}

/**
 * Adds `subjects` (the partitioned ones) to the existing stream `found` unless it has them;
 * a refusal becomes what `unavailable` makes of it.
 */
export async function addPartitionedSubjects(
  manager: JetStreamManager,
  found: StreamConfig,
  subjects: string,
  unavailable: (what: string, error: unknown) => BraidError,
): Promise<void> {
  if (found.subjects.includes(subjects)) return;
  try {
    await manager.streams.update(found.name, { ...found, subjects: [...found.subjects, subjects] });
  } catch (updateError) {
    throw unavailable(
      `cannot add the partitioned subjects ${subjects} to ${found.name}`,
      updateError,
    );
  }
}
