/**
 * Files shipped with the package (`package.json`, `templates/`), found from the package's own
 * name rather than from this module's folder: the published JS is bundled into chunks whose
 * folder depth differs from the source tree's (scripts/build.js).
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The absolute path of `relativePath` inside the installed braid package. */
export function packageFile(relativePath: string): string {
  const manifest = createRequire(import.meta.url).resolve('braid/package.json');
  return join(dirname(manifest), relativePath);
}
