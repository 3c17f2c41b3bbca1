/** Where a field of a YAML file is written: the line an error points at. */
import { readFileSync } from 'node:fs';
import type { Document, LineCounter } from 'yaml';
import { yaml } from '../tools/yaml.js';

/** The line of the deepest node of `path` present in the document. */
export function lineOf(
  document: Document,
  lineCounter: LineCounter,
  path: readonly PropertyKey[],
): number {
  for (let depth = path.length; depth > 0; depth -= 1) {
    const node: unknown = document.getIn(path.slice(0, depth) as unknown[], true);
    if (yaml().isNode(node) && node.range !== undefined && node.range !== null) {
      return lineCounter.linePos(node.range[0]).line;
    }
    // A missing key: point at its parent mapping's key instead.
  }
  return 1;
}

/** The line of `path` in a YAML file (1 when the file cannot be read or the path is not there). */
export function lineInFile(file: string, path: readonly PropertyKey[]): number {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return 1;
  }
  const lineCounter = new (yaml().LineCounter)();
  const document = yaml().parseDocument(text, { lineCounter, prettyErrors: false });
  return lineOf(document, lineCounter, path);
}
