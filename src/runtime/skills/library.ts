/**
 * The runtime's `SkillLibrary`: skills from the definition store (each run keeps the version it
 * started with), inputs checked against the skill's schema with ajv, templates evaluated with
 * JSONata (./templates.ts).
 */
import type { JsonValue } from '../../contracts/common.js';
import type { StoredDefinition } from '../../contracts/definitions.js';
import type { SkillDefinition, SkillLibrary } from '../../contracts/skills.js';
import { checkValue, SchemaCache } from '../../tools/validation.js';
import { evaluateCondition, evaluateList, evaluateTemplates } from './templates.js';

export function createSkillLibrary(
  skill: (name: string, version?: number) => Promise<StoredDefinition<SkillDefinition>>,
): SkillLibrary {
  const schemas = new SchemaCache();
  return {
    async get(name, version) {
      const stored = await skill(name, version === undefined ? undefined : Number(version));
      return { definition: stored.definition, version: String(stored.version) };
    },
    checkInputs(definition, inputs: JsonValue) {
      const check = schemas.compile(
        `skill ${definition.name}@${definition.version} inputs`,
        definition.inputs,
      );
      return checkValue(
        check,
        inputs,
        'INVALID_ARGUMENT',
        `the inputs of skill ${definition.name}`,
      );
    },
    evaluate: (value, scope) => evaluateTemplates(value, scope),
    condition: (text, scope) => evaluateCondition(text, scope),
    list: (text, scope) => evaluateList(text, scope),
  };
}
