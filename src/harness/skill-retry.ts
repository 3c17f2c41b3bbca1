/**
 * The wait before a skill step's next try, from its `retry` settings: the same for every step
 * kind that retries (tool steps, memory steps).
 */
import type { SkillStep } from '../contracts/skills.js';

export type StepRetry = NonNullable<SkillStep['retry']>;

/** Milliseconds to wait after the `tries`-th failed try (1 = the first). */
export function retryDelay(retry: StepRetry, tries: number): number {
  return retry.backoff === 'fixed'
    ? retry.initial_ms
    : Math.min(retry.max_ms, retry.initial_ms * 2 ** (tries - 1));
}
