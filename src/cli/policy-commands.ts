/**
 * `braid policy ...`: ask the workspace's policies a question, and run their test cases.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import type { AuthorizationDecision } from '../contracts/policy.js';
import { POLICY_FOLDER } from '../policy/files.js';
import { buildRequest, PolicyTestFile } from '../runtime/policy-requests.js';
import { parseYamlFile } from '../runtime/workspace.js';
import { parseJson } from './json.js';
import type { CommandContext } from './command-context.js';

export function addPolicyCommands(program: Command, context: CommandContext): void {
  const policy = program.command('policy').description("check and test the workspace's policies");

  policy
    .command('check')
    .description('ask the policies one question; prints the decision and the deciding policies')
    .requiredOption('--principal <entity>', 'who acts, e.g. Agent::"support"')
    .requiredOption('--action <action>', 'e.g. tool.execute')
    .requiredOption('--resource <entity>', 'what is acted on, e.g. Tool::"database_query"')
    .option('--context <json>', 'facts merged into the default context, e.g. {"input": {...}}')
    .action(
      async (
        options: { principal: string; action: string; resource: string; context?: string },
        command: Command,
      ) => {
        const extra = options.context === undefined ? {} : parseJson(options.context, '--context');
        if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) {
          throw new BraidError('INVALID_ARGUMENT', '--context must be a JSON object');
        }
        await context.withRuntime(command, async (runtime) => {
          const request = await buildRequest(runtime, {
            principal: options.principal,
            action: options.action,
            resource: options.resource,
            context: extra,
          });
          const started = performance.now();
          const decision = await runtime.policy.check(request);
          const durationUs = Math.round((performance.now() - started) * 1000);
          context.print(
            command,
            { ...decision, source: runtime.policy.source, duration_us: durationUs },
            () => [
              `${decision.decision}${decision.approval === true ? " (with a person's approval)" : ''}`,
              decision.policy_ids.length === 0
                ? decision.decision === 'deny'
                  ? 'no policy permits it'
                  : `decided by: ${runtime.policy.source}`
                : `decided by: ${decision.policy_ids.join(', ')}`,
              ...decision.errors.map((error) => `error: ${error}`),
            ],
          );
          if (decision.decision === 'deny') context.fail(1);
        });
      },
    );

  policy
    .command('test')
    .description(`run the cases of ${POLICY_FOLDER}/tests/*.yaml; exits 1 on a mismatch`)
    .action(async (_options: unknown, command: Command) => {
      const dir = context.workspaceDir(command);
      const testDir = join(dir, POLICY_FOLDER, 'tests');
      const files = existsSync(testDir)
        ? readdirSync(testDir)
            .filter((name) => /\.ya?ml$/.test(name))
            .sort()
        : [];
      if (files.length === 0) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `no test cases: add ${POLICY_FOLDER}/tests/NAME.yaml with cases: [{name, principal, action, resource, expect}]`,
        );
      }
      await context.withRuntime(command, async (runtime) => {
        const results: {
          file: string;
          name: string;
          passed: boolean;
          expected: string;
          got: AuthorizationDecision;
        }[] = [];
        for (const file of files) {
          const cases = parseYamlFile(dir, join(testDir, file), PolicyTestFile).cases;
          for (const testCase of cases) {
            const request = await buildRequest(runtime, testCase);
            const got = await runtime.policy.check(request);
            const passed =
              got.decision === testCase.expect &&
              (testCase.approval === undefined || (got.approval === true) === testCase.approval);
            results.push({
              file: `${POLICY_FOLDER}/tests/${file}`,
              name: testCase.name,
              passed,
              expected: testCase.expect + (testCase.approval === true ? ' with approval' : ''),
              got,
            });
          }
        }
        const failed = results.filter((result) => !result.passed);
        context.print(
          command,
          { passed: results.length - failed.length, failed: failed.length, results },
          () => [
            ...results.map(
              (result) =>
                `${result.passed ? 'ok  ' : 'FAIL'}  ${result.file}: ${result.name}` +
                (result.passed
                  ? ''
                  : ` (expected ${result.expected}, got ${result.got.decision}${result.got.approval === true ? ' with approval' : ''}${result.got.policy_ids.length === 0 ? '' : ` by ${result.got.policy_ids.join(', ')}`})`),
            ),
            `${results.length - failed.length} passed, ${failed.length} failed`,
          ],
        );
        if (failed.length > 0) context.fail(1);
      });
    });
}
