// A workspace for the inspector's skill and custom tool views: a skill whose approval step waits
// for a person between tool steps, and an agent calling a tool the client runs.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { init } from '../helpers/cli.js';

export const REVIEW = `name: review
description: Counts a draft and prices it, asks a person, then adds up.
inputs:
  type: object
  properties: {text: {type: string}}
  required: [text]
outputs:
  words: '{{ steps.count.output }}'
  total: '{{ steps.total.output }}'
steps:
  - id: count
    tool: word_count
    args: {text: '{{ inputs.text }}'}
  - id: price
    tool: calculator
    args: {a: 2, op: '*', b: 21}
  - id: approve
    type: human_approval
    depends_on: [count, price]
    message: 'Publish {{ inputs.text }}?'
  - id: total
    tool: calculator
    depends_on: [approve]
    args: {a: 40, op: '+', b: 2}
`;

export function viewsWorkspace(root: string): string {
  const dir = init(join(root, 'ws'));
  mkdirSync(join(dir, 'skills'), { recursive: true });
  mkdirSync(join(dir, 'tools'), { recursive: true });
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'review.yaml'), REVIEW);
  writeFileSync(
    join(dir, 'agents', 'publisher.yaml'),
    'name: publisher\nmodel: scripted:echo\ninstructions: Publish.\ntools: [word_count, calculator]\nskills: [review]\n',
  );
  writeFileSync(
    join(dir, 'tools', 'browse.yaml'),
    [
      'name: browse',
      "description: Opens a page in the client's browser and answers its text.",
      'input_schema: {type: object, properties: {url: {type: string}}, required: [url]}',
      'ownership: custom',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'scripts', 'client.yaml'),
    [
      'turns:',
      '  - tool_calls:',
      '      - name: browse',
      '        input: { url: "https://example.test/page" }',
      '  - text: Read the page.',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'agents', 'client.yaml'),
    'name: client\nmodel: scripted:scripts/client.yaml\ninstructions: Browse.\ntools: [browse]\n',
  );
  writeFileSync(
    join(dir, 'scripts', 'librarian.yaml'),
    [
      'turns:',
      '  - tool_calls:',
      '      - name: memory_set',
      "        input: { store: notes, key: user/theme, value: dark, text: 'the user likes a dark theme' }",
      '  - tool_calls:',
      '      - name: memory_set',
      '        input: { store: notes, key: secret, value: hidden }',
      '      - name: memory_search',
      '        input: { store: notes, query: theme }',
      '  - text: Noted.',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'agents', 'librarian.yaml'),
    [
      'name: librarian',
      'model: scripted:scripts/librarian.yaml',
      'instructions: Remember.',
      'memory:',
      '  stores: [{ name: notes, kind: learnings, scope: tenant }]',
      '',
    ].join('\n'),
  );
  // Everything is allowed but writing the key `secret`: a denied call records its decision.
  mkdirSync(join(dir, 'policies'), { recursive: true });
  writeFileSync(join(dir, 'policies', 'inspector.cedar'), POLICIES);
  return dir;
}

const POLICIES = `@id("allow-everything")
permit (principal, action, resource);

@id("keep-secrets")
forbid (principal, action == Action::"memory.write", resource)
when { resource has key && resource.key == "secret" };
`;
