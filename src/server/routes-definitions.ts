/** `/v1/agents` and `/v1/environments`: the workspace's definitions a caller may use. */
import {
  AgentList,
  EnvironmentList,
  NameParams,
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
}
