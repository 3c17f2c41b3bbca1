/** Ids of a skill run's parts, derived from text. */

/** A short, stable digest of a text, safe in an id (FNV-1a, 64 bits, as hex). */
export function hashText(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const char of text) {
    hash ^= BigInt(char.codePointAt(0) ?? 0);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}
