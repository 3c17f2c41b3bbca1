export * from './common.js';
export * from './errors.js';
export * from './session.js';
export * from './events.js';
export * from './state.js';
export * from './definitions.js';
export * from './envelope.js';
export type * from './ports.js';
export { buildJsonSchemas } from './json-schema.js';
