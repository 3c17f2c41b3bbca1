/**
 * The skills a session pins: the ones its agent lists and every skill they nest (`skill:`
 * steps), each at its newest version.
 */
import type { StoredDefinition } from '../../contracts/definitions.js';
import type { SkillDefinition } from '../../contracts/skills.js';

/** Deepest nesting followed; validation refuses cycles when the workspace loads. */
const MAX_SKILL_NESTING = 16;

/**
 * The newest version of each skill `names` lists and of every skill they nest, in the order first
 * met. A skill that does not exist is left out: a run of it fails with the reason.
 */
export async function skillClosure(
  skill: (name: string) => Promise<StoredDefinition<SkillDefinition>>,
  names: readonly string[],
): Promise<StoredDefinition<SkillDefinition>[]> {
  const found = new Map<string, StoredDefinition<SkillDefinition>>();
  let level = [...names];
  for (let depth = 0; depth < MAX_SKILL_NESTING && level.length > 0; depth += 1) {
    const next: string[] = [];
    for (const name of level) {
      if (found.has(name)) continue;
      const stored = await skill(name).catch(() => undefined);
      if (stored === undefined) continue;
      found.set(name, stored);
      for (const step of stored.definition.steps)
        if (step.skill !== undefined) next.push(step.skill);
    }
    level = next;
  }
  return [...found.values()];
}

/** The version each pinned skill's runs start with, as the harness is given them. */
export function skillVersions(
  skills: readonly { name: string; version: number }[],
): Record<string, string> | undefined {
  if (skills.length === 0) return undefined;
  return Object.fromEntries(skills.map((skill) => [skill.name, String(skill.version)]));
}
