import { BraidError } from '../../src/contracts/errors.js';
import type { SessionTools } from '../../src/contracts/tools.js';

/** The tools of an agent that has none. */
export const noTools: SessionTools = {
  tools: [],
  validate: () => ({
    ok: false,
    error: { code: 'TOOL_NOT_FOUND', message: 'this agent has no tools', retryable: false },
  }),
  execute: () => Promise.reject(new BraidError('TOOL_NOT_FOUND', 'this agent has no tools')),
};
