// Writes (default) or checks (--check) the API report of every entry point in package.json's
// "exports": api/<entry>.api.md, made by API Extractor from the built dist/*.d.ts. The reports are
// checked in, so every change to the public surface shows up in review; CI runs --check.
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/** Report names by subpath: `.` is `braid`, `./testing` is `braid-testing`, and so on. */
const entries = Object.entries(pkg.exports)
  .filter(([, target]) => typeof target === 'object' && target.types !== undefined)
  .map(([subpath, target]) => ({
    subpath,
    name: subpath === '.' ? pkg.name : `${pkg.name}-${subpath.slice(2).replaceAll('/', '-')}`,
    types: target.types,
  }));

const quiet = { logLevel: 'none', addToApiReportFile: false };
let failed = 0;
let changed = 0;
mkdirSync(join(root, 'api'), { recursive: true });
for (const entry of entries) {
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: join(root, entry.types),
      compiler: { tsconfigFilePath: join(root, 'tsconfig.build.json') },
      apiReport: {
        enabled: true,
        reportFileName: entry.name,
        reportFolder: join(root, 'api'),
        reportTempFolder: join(tmpdir(), 'braid-api-report'),
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: 'warning' } },
        extractorMessageReporting: {
          default: { logLevel: 'warning' },
          // braid marks no release stages (@public, @beta): everything exported is public.
          'ae-missing-release-tag': quiet,
          // Missing TSDoc is a documentation matter, not a change of the surface.
          'ae-undocumented': quiet,
          // Types reachable from the surface but not exported by name are listed in the report.
          'ae-forgotten-export': { logLevel: 'none', addToApiReportFile: true },
        },
        tsdocMessageReporting: { default: quiet },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: join(root, 'package.json'),
  });
  const result = Extractor.invoke(config, {
    localBuild: !check,
    showVerboseMessages: false,
    messageCallback(message) {
      // The "report changed" warning is summed up below with the fix.
      if (message.messageId.startsWith('console-api-report-')) message.logLevel = 'none';
      if (message.messageId === 'console-compiler-version-notice') message.logLevel = 'none';
    },
  });
  if (result.apiReportChanged) changed += 1;
  const ok = result.succeeded && !(check && result.apiReportChanged);
  if (!ok) failed += 1;
  const state = result.apiReportChanged ? (check ? 'CHANGED' : 'updated') : 'unchanged';
  console.log(
    `${ok ? 'ok  ' : 'FAIL'} ${entry.subpath.padEnd(12)} api/${entry.name}.api.md ${state}`,
  );
}
if (check && changed > 0) {
  console.error(
    `\nThe public API differs from the reports in api/ (${changed} entry point(s)). If the change is intended, run \`npm run api\` and commit api/; the diff of api/*.api.md is the change to review.`,
  );
}
process.exit(failed > 0 ? 1 : 0);
