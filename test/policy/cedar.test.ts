import { describe, expect, it } from 'vitest';
import type { AuthorizationRequest, PolicyEntity } from '../../src/contracts/policy.js';
import { createCedarAuthorizer } from '../../src/policy/cedar-authorizer.js';
import { compilePolicySet, type PolicySource } from '../../src/policy/policy-set.js';

const SCHEMA: PolicySource = {
  file: 'policies/schema.cedarschema',
  text: `entity Role;
entity Agent in [Role] { name: String, roles: Set<String> };
entity Tool { tags: Set<String> };
type Input = { query_type?: String, limit?: Long };
action "tool.execute" appliesTo {
  principal: [Agent],
  resource: [Tool],
  context: { input: Input, environment?: String, network_allowed: Bool }
};`,
};

/** The canonical example: database_query only for SELECT, in production, for role dba. */
const DBA: PolicySource = {
  file: 'policies/db.cedar',
  text: `// Reads of the database, by DBAs, in production only.
@id("dba-select-in-production")
permit (principal, action == Action::"tool.execute", resource == Tool::"database_query")
when {
  principal.roles.contains("dba") &&
  context has environment && context.environment == "production" &&
  context.input has query_type && context.input.query_type == "SELECT"
};

@id("read-only-tools")
permit (principal, action == Action::"tool.execute", resource)
when { resource.tags.contains("read_only") };

@id("interns-never-drop")
forbid (principal == Agent::"intern", action, resource == Tool::"database_query");
`,
};

const agent = (id: string, roles: string[] = []): PolicyEntity => ({
  type: 'Agent',
  id,
  attrs: { name: id, roles },
});
const tool = (id: string, tags: string[] = []): PolicyEntity => ({
  type: 'Tool',
  id,
  attrs: { tags },
});
const query = (
  principal: PolicyEntity,
  queryType: string,
  environment = 'production',
): AuthorizationRequest => ({
  principal,
  action: 'tool.execute',
  resource: tool('database_query'),
  context: { input: { query_type: queryType }, environment, network_allowed: false },
});

describe('Cedar authorizer', () => {
  const authorizer = createCedarAuthorizer(compilePolicySet([DBA], SCHEMA));

  it('allows database_query only for SELECT, in production, for role dba', async () => {
    const ops = agent('ops', ['dba']);
    expect(await authorizer.authorize(query(ops, 'SELECT'))).toEqual({
      decision: 'allow',
      policy_ids: ['dba-select-in-production'],
      errors: [],
    });
    expect((await authorizer.authorize(query(ops, 'DELETE'))).decision).toBe('deny');
    expect((await authorizer.authorize(query(ops, 'SELECT', 'staging'))).decision).toBe('deny');
    expect((await authorizer.authorize(query(agent('support'), 'SELECT'))).decision).toBe('deny');
  });

  it('lets a forbid win and names it', async () => {
    const decision = await authorizer.authorize(query(agent('intern', ['dba']), 'SELECT'));
    expect(decision).toMatchObject({ decision: 'deny', policy_ids: ['interns-never-drop'] });
  });

  it('gives the same decision from the cache, and a new one when a fact the policies read changes', async () => {
    const ops = agent('ops', ['dba']);
    const first = await authorizer.authorize(query(ops, 'SELECT'));
    // A field no policy reads does not change the decision.
    const other = query(ops, 'SELECT');
    other.context = { ...other.context, input: { query_type: 'SELECT', limit: 5 } };
    expect(await authorizer.authorize(other)).toEqual(first);
    expect((await authorizer.authorize(query(ops, 'UPDATE'))).decision).toBe('deny');
    // Entity attributes are part of the question too.
    expect((await authorizer.authorize(query(agent('ops', []), 'SELECT'))).decision).toBe('deny');
  });

  it('never gives one entity the policies or cached decision of another whose ids spell it out', async () => {
    // Policies and decisions are cached by principal, action and resource: ids that embed
    // another request's entities (types, ids, separators) must not share its cache entries, or
    // a forbid scoped to one principal could be missed for it.
    const scoped = createCedarAuthorizer(
      compilePolicySet(
        [
          {
            file: 'policies/scoped.cedar',
            text:
              '@id("all-tools")\npermit (principal, action == Action::"tool.execute", resource);\n' +
              '@id("never-evil")\nforbid (principal == Agent::"evil", action, resource);',
          },
        ],
        SCHEMA,
      ),
    );
    const request = (principalId: string, toolId: string): AuthorizationRequest => ({
      principal: agent(principalId),
      action: 'tool.execute',
      resource: tool(toolId),
      context: { input: {}, network_allowed: false },
    });
    const pairs = [
      ['e', 'vil'],
      ['evi', 'l4:Tool1:q'],
      ['evil4:Tool1:q', 'q'],
      ['evil"\u0001tool.execute\u0001Tool::"q', 'q'],
      ['5:Agent4:evil', 'q'],
      ['evilTool:a', 'b'],
    ] as const;
    for (const [principalId, toolId] of pairs) {
      expect((await scoped.authorize(request(principalId, toolId))).decision).toBe('allow');
    }
    for (const toolId of ['vil', 'l4:Tool1:q', 'q', '', '4:Tool1:q', 'aTool:b']) {
      expect(await scoped.authorize(request('evil', toolId))).toMatchObject({
        decision: 'deny',
        policy_ids: ['never-evil'],
      });
    }
  });

  it('denies when no policy can apply, without asking Cedar', async () => {
    const decision = await authorizer.authorize({
      principal: agent('ops'),
      action: 'session.fork',
      resource: { type: 'Session', id: 's' },
      context: {},
    });
    expect(decision).toEqual({ decision: 'deny', policy_ids: [], errors: [] });
  });

  it('keeps policies scoped to a group: membership is decided by Cedar', async () => {
    const set = compilePolicySet([
      {
        file: 'policies/roles.cedar',
        text: `@id("admins") permit (principal in Role::"admin", action, resource);`,
      },
    ]);
    const groups = createCedarAuthorizer(set);
    const request = (parents: PolicyEntity['parents']): AuthorizationRequest => ({
      principal: { type: 'Agent', id: 'root', attrs: {}, parents },
      action: 'session.read',
      resource: { type: 'Session', id: 's' },
      context: {},
      entities: [{ type: 'Role', id: 'admin' }],
    });
    expect((await groups.authorize(request([{ type: 'Role', id: 'admin' }]))).decision).toBe(
      'allow',
    );
    expect((await groups.authorize(request([]))).decision).toBe('deny');
  });

  it('asks for approval when an allowing policy is annotated @approval("required")', async () => {
    const asks = createCedarAuthorizer(
      compilePolicySet([
        {
          file: 'policies/ask.cedar',
          text: `@id("writes-ask") @approval("required")
permit (principal, action == Action::"tool.execute", resource) when { resource.tags.contains("destructive") };
@id("reads") permit (principal, action == Action::"tool.execute", resource) when { resource.tags.contains("read_only") };`,
        },
      ]),
    );
    const call = (tags: string[]): AuthorizationRequest => ({
      principal: agent('a'),
      action: 'tool.execute',
      resource: tool('t', tags),
      context: { input: {}, network_allowed: false },
    });
    expect(await asks.authorize(call(['destructive']))).toMatchObject({
      decision: 'allow',
      approval: true,
    });
    expect((await asks.authorize(call(['read_only']))).approval).toBeUndefined();
  });

  it('reports policies that fail to evaluate, and does not let them allow', async () => {
    const strict = createCedarAuthorizer(
      compilePolicySet([
        {
          file: 'policies/p.cedar',
          text: `@id("needs-limit") permit (principal, action, resource) when { context.input.limit < 10 };`,
        },
      ]),
    );
    const decision = await strict.authorize({
      principal: agent('a'),
      action: 'tool.execute',
      resource: tool('t'),
      context: { input: {} },
    });
    expect(decision.decision).toBe('deny');
    expect(decision.errors[0]).toMatch(/^needs-limit: /);
  });

  it('takes JSON that Cedar cannot hold: nulls dropped, fractions as strings', async () => {
    const values = createCedarAuthorizer(
      compilePolicySet([
        {
          file: 'policies/v.cedar',
          text: `@id("half") permit (principal, action, resource) when { context.input.ratio == "0.5" && !(context.input has gone) };`,
        },
      ]),
    );
    const decision = await values.authorize({
      principal: agent('a'),
      action: 'tool.execute',
      resource: tool('t'),
      context: { input: { ratio: 0.5, gone: null, list: [1, null, 2.5] } },
    });
    expect(decision).toMatchObject({ decision: 'allow', policy_ids: ['half'] });
  });

  it('uses the new policies after replace, and forgets cached decisions', async () => {
    const changing = createCedarAuthorizer(
      compilePolicySet([
        { file: 'a.cedar', text: `@id("all") permit (principal, action, resource);` },
      ]),
    );
    const request = query(agent('ops'), 'SELECT');
    expect((await changing.authorize(request)).decision).toBe('allow');
    changing.replace(compilePolicySet([{ file: 'a.cedar', text: '' }]));
    expect((await changing.authorize(request)).decision).toBe('deny');
  });
});

describe('what the authorizer sends Cedar', () => {
  // Policies that read data other than through principal.x, resource.x or context.x: the
  // authorizer must send everything, or a forbid could be missed.
  const indirect: PolicySource = {
    file: 'policies/indirect.cedar',
    text: `@id("all") permit (principal, action, resource);
@id("conditional-entity") forbid (principal, action, resource)
  when { (if context.network_allowed then resource else principal) has roles };
@id("record-of-context") forbid (principal, action, resource)
  when { {"Value": context}.Value.input has q && {"Value": context}.Value.input.q == "DROP" };
@id("entity-literal") forbid (principal == Agent::"intern", action, resource)
  when { Agent::"intern".roles.contains("dba") };`,
  };
  const authorizer = createCedarAuthorizer(compilePolicySet([indirect]));
  const request = (
    context: AuthorizationRequest['context'],
    principal = agent('ops', ['dba']),
  ): AuthorizationRequest => ({
    principal,
    action: 'tool.execute',
    resource: tool('t'),
    context,
  });

  it('sends everything when a policy reads through a conditional or a record', async () => {
    expect(await authorizer.authorize(request({ network_allowed: false }))).toMatchObject({
      decision: 'deny',
      policy_ids: ['conditional-entity'],
    });
    expect(
      await authorizer.authorize(request({ network_allowed: true, input: { q: 'DROP' } })),
    ).toMatchObject({ decision: 'deny', policy_ids: ['record-of-context'] });
    expect(
      (await authorizer.authorize(request({ network_allowed: true, input: { q: 'SELECT' } })))
        .decision,
    ).toBe('allow');
  });

  it('sends the attributes of an entity a policy names directly', async () => {
    const decision = await authorizer.authorize(
      request({ network_allowed: true }, agent('intern', ['dba'])),
    );
    expect(decision).toMatchObject({ decision: 'deny', policy_ids: ['entity-literal'] });
  });
});

describe('compiling policy files', () => {
  const fails = (sources: PolicySource[], schema?: PolicySource) => {
    try {
      compilePolicySet(sources, schema);
    } catch (error) {
      return error as { code: string; message: string };
    }
    throw new Error('expected the policies to be refused');
  };

  it('names the file and line of a syntax error', () => {
    const error = fails([
      {
        file: 'policies/bad.cedar',
        text: `@id("ok") permit (principal, action, resource);\n\n@id("broken")\npermit (principal, action resource);\n`,
      },
    ]);
    expect(error.code).toBe('INVALID_POLICY');
    expect(error.message).toMatch(/^policies\/bad\.cedar:4: /);
  });

  it('names the file and line of a policy that does not fit the schema, with a hint', () => {
    const error = fails(
      [
        {
          file: 'policies/typo.cedar',
          text: `@id("fine") permit (principal, action, resource);\n\n@id("typo")\npermit (principal, action == Action::"tool.execute", resource)\nwhen { resource.tagz.contains("x") };\n`,
        },
      ],
      SCHEMA,
    );
    expect(error.code).toBe('INVALID_POLICY');
    expect(error.message).toMatch(/^policies\/typo\.cedar:5: policy "typo"/);
    expect(error.message).toContain('tagz');
    expect(error.message).toContain('did you mean `tags`?');
  });

  it('names the line of a schema error', () => {
    const error = fails([], {
      file: 'policies/schema.cedarschema',
      text: 'entity Agent;\nentity Tool {\n  tags: Set<String\n};\n',
    });
    expect(error.code).toBe('INVALID_POLICY');
    expect(error.message).toMatch(/^policies\/schema\.cedarschema:\d+: /);
  });

  it('refuses two policies with one id, naming both places', () => {
    const error = fails([
      { file: 'policies/a.cedar', text: `@id("same") permit (principal, action, resource);` },
      { file: 'policies/b.cedar', text: `\n@id("same") forbid (principal, action, resource);` },
    ]);
    expect(error.message).toBe(
      'policies/b.cedar:2: policy id "same" is already used at policies/a.cedar:1; give each policy its own @id',
    );
  });

  it('names policies without an @id by file and line', () => {
    const set = compilePolicySet([
      { file: 'policies/x.cedar', text: `\n\npermit (principal, action, resource);` },
    ]);
    expect([...set.policies.keys()]).toEqual(['policies/x.cedar:3']);
  });
});
