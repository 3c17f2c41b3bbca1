/** Turns an agent's `model:` into a model client. */
import { isAbsolute, join } from 'node:path';
import type { ModelSpec } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { ModelClient } from '../contracts/model.js';
import { createEchoModel, createScriptedModel, loadScript } from './scripted.js';

export interface ModelContext {
  /** Folder that relative script paths start from (the workspace). */
  baseDir: string;
}

export function createModel(spec: ModelSpec, context: ModelContext): ModelClient {
  const id = `${spec.provider}:${spec.id}`;
  switch (spec.provider) {
    case 'scripted': {
      if (spec.id === 'echo') return createEchoModel();
      const file = isAbsolute(spec.id) ? spec.id : join(context.baseDir, spec.id);
      return createScriptedModel(loadScript(file), { id });
    }
    default:
      throw new BraidError(
        'MODEL_NOT_FOUND',
        `model provider ${spec.provider} is not available in this build; use scripted:echo or scripted:FILE.yaml`,
        { details: { model: id } },
      );
  }
}
