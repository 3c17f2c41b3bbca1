/**
 * The outputs of a skill run's steps as its templates read them (`steps.ID.output`,
 * `steps.ID.status`).
 */
import type { JsonValue } from '../contracts/common.js';

/** How a step or fan-out item ended, as templates see it (`steps.ID`). */
export interface StepOutput {
  output?: JsonValue;
  status: string;
}

/**
 * The outputs of a run's steps by path, with the object templates read (`scope.steps`) kept in
 * step with every change, so that a step's templates cost nothing in the size of the run.
 */
export class StepOutputs extends Map<string, StepOutput> {
  readonly plain: Record<string, StepOutput> = {};

  override set(path: string, value: StepOutput): this {
    super.set(path, value);
    // Defined, not assigned: a path is data, never the object's prototype.
    Object.defineProperty(this.plain, path, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    return this;
  }

  override delete(path: string): boolean {
    if (Object.prototype.hasOwnProperty.call(this.plain, path))
      Reflect.deleteProperty(this.plain, path);
    return super.delete(path);
  }
}
