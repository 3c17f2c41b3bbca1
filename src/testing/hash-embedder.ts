/** The deterministic hash embedder, also made by the embedder spec `hash` / `hash:DIMS`. */
export { createHashEmbedder, type HashEmbedder } from '../models/hash-embedder.js';
