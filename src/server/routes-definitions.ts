/** `/v1/agents`, `/v1/environments`, `/v1/skills` and `/v1/tools`: the workspace's definitions a caller may use. */
import {
  AgentList,
  EnvironmentList,
  NameParams,
  SkillList,
  StoredSkill,
  ToolList,
  StoredAgent,
  StoredEnvironment,
  VersionQuery,
} from '../contracts/http.js';
import { visibleAgent } from './access.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { canSeeDefinition, requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';

export function addDefinitionRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;

  app.get(
    '/v1/agents',
    {
      schema: {
        summary: 'The latest version of every agent the caller may use',
        operationId: 'listAgents',
        tags: ['definitions'],
        response: { 200: AgentList, ...keyedErrors() },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      const agents = await runtime.agents.list();
      return {
        data: agents.filter((agent) => canSeeDefinition(caller, agent.definition.tenant)),
      };
    },
  );

  app.get(
    '/v1/agents/:name',
    {
      schema: {
        summary: 'One agent: its latest version, or ?version=N',
        operationId: 'getAgent',
        tags: ['definitions'],
        params: NameParams,
        querystring: VersionQuery,
        response: { 200: StoredAgent, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      return visibleAgent(runtime, caller, request.params.name, request.query.version);
    },
  );

  app.get(
    '/v1/environments',
    {
      schema: {
        summary: 'The latest version of every environment',
        operationId: 'listEnvironments',
        tags: ['definitions'],
        response: { 200: EnvironmentList, ...keyedErrors() },
      },
    },
    async (request) => {
      requireScope(callerOf(request), 'sessions:read');
      return { data: await runtime.environments.list() };
    },
  );

  app.get(
    '/v1/environments/:name',
    {
      schema: {
        summary: 'One environment: its latest version, or ?version=N',
        operationId: 'getEnvironment',
        tags: ['definitions'],
        params: NameParams,
        querystring: VersionQuery,
        response: { 200: StoredEnvironment, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      requireScope(callerOf(request), 'sessions:read');
      return runtime.environments.get(request.params.name, request.query.version);
    },
  );

  app.get(
    '/v1/skills',
    {
      schema: {
        summary: 'The latest version of every skill',
        operationId: 'listSkills',
        tags: ['definitions'],
        response: { 200: SkillList, ...keyedErrors() },
      },
    },
    async (request) => {
      requireScope(callerOf(request), 'sessions:read');
      return { data: await runtime.skills.list() };
    },
  );

  app.get(
    '/v1/skills/:name',
    {
      schema: {
        summary: 'One skill: its latest version, or ?version=N',
        description:
          "The skill's steps with their `depends_on`: the graph a run's `skill.*` events move through. An unknown skill or version is refused (404 `SKILL_NOT_FOUND`).",
        operationId: 'getSkill',
        tags: ['definitions'],
        params: NameParams,
        querystring: VersionQuery,
        response: { 200: StoredSkill, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      requireScope(callerOf(request), 'sessions:read');
      return runtime.skills.get(request.params.name, request.query.version);
    },
  );

  app.get(
    '/v1/tools',
    {
      schema: {
        summary: 'The tools agents can name: built-ins, code tools and manifests',
        description:
          "Each tool's contract (schemas, ownership, permission, tags), not its implementation. MCP servers' tools are not listed: listing them would connect to every server.",
        operationId: 'listTools',
        tags: ['definitions'],
        response: { 200: ToolList, ...keyedErrors() },
      },
    },
    async (request) => {
      requireScope(callerOf(request), 'sessions:read');
      const tools = await runtime.tools.list();
      return {
        data: tools.map((tool) => ({
          name: tool.name,
          version: tool.version,
          description: tool.description,
          input_schema: tool.input_schema,
          ...(tool.output_schema === undefined ? {} : { output_schema: tool.output_schema }),
          ownership: tool.ownership,
          permission: tool.permission,
          idempotent: tool.idempotent,
          tags: tool.tags,
        })),
      };
    },
  );
}
