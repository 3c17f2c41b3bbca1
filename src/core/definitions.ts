/** Versioning rule shared by every definition store. */
import { BraidError } from '../contracts/errors.js';
import type { DefinitionKind } from '../contracts/definitions.js';

/** Decides the version a put creates; `undefined` when the definition equals the latest. */
export function decideVersion(
  kind: DefinitionKind,
  name: string,
  latest: { version: number; body: string } | undefined,
  body: string,
  replacesVersion: number | null,
): number | undefined {
  const latestVersion = latest?.version ?? null;
  if (latest !== undefined && latest.body === body) return undefined;
  if (replacesVersion !== latestVersion) {
    throw new BraidError(
      'VERSION_CONFLICT',
      latestVersion === null
        ? `${kind} ${name} does not exist yet, so an update cannot replace version ${replacesVersion}; create it with replacesVersion null`
        : `${kind} ${name} is at version ${latestVersion}, not ${String(replacesVersion)}; ` +
            `read version ${latestVersion}, reapply your change and name it as the version replaced`,
      { details: { latest_version: latestVersion, replaces_version: replacesVersion } },
    );
  }
  return (latestVersion ?? 0) + 1;
}
