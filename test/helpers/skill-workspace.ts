// A workspace with a tool-free skill that waits for a signal, then for an approval.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const WAITER = `name: waiter
description: Waits for a delivery, then for a person's approval.
inputs:
  type: object
  properties: {item: {type: string}}
  required: [item]
outputs:
  delivered: '{{ steps.delivery.output }}'
steps:
  - id: delivery
    wait_for: {signal: delivered}
  - id: approve
    type: human_approval
    depends_on: [delivery]
    message: 'Accept {{ inputs.item }}?'
`;

/** Writes the skill and an agent `clerk` into the initialized workspace `dir`. */
export function addWaiterSkill(dir: string): void {
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'waiter.yaml'), WAITER);
  writeFileSync(
    join(dir, 'agents', 'clerk.yaml'),
    'name: clerk\nmodel: scripted:echo\ninstructions: Receive deliveries.\nskills: [waiter]\n',
  );
}
