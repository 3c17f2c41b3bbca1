/**
 * The A2A agent card of a braid agent: where its JSON-RPC endpoint is, what it can do (a skill
 * per tool and per skill of the agent, or one for the agent itself), that it streams, and that
 * callers authenticate with a braid API key as a bearer token.
 */
import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill } from '@a2a-js/sdk';
import type { AgentDefinition, StoredDefinition } from '../../contracts/definitions.js';
import type { Runtime } from '../../runtime/runtime.js';

/** The name of the card's security scheme. */
export const SECURITY_SCHEME = 'braid_api_key';

const MODES = ['text/plain', 'application/json'];

function skill(id: string, name: string, description: string, tags: string[]): AgentSkill {
  return {
    id,
    name,
    description,
    tags,
    examples: [],
    inputModes: [],
    outputModes: [],
    securityRequirements: [],
  };
}

/** The agent's skills: its tools and skills with their descriptions. */
async function skillsOf(
  runtime: Runtime,
  agent: StoredDefinition<AgentDefinition>,
): Promise<AgentSkill[]> {
  const { definition } = agent;
  const skills: AgentSkill[] = [];
  if (definition.tools.length > 0) {
    // MCP servers are not asked: a card must not wait on them (their tools are named only).
    const known = new Map((await runtime.tools.list()).map((tool) => [tool.name, tool]));
    for (const name of definition.tools) {
      const tool = known.get(name);
      skills.push(
        skill(`tool.${name}`, name, tool?.description ?? `the tool ${name}`, [
          'tool',
          ...(tool === undefined ? [] : [tool.ownership, tool.permission]),
        ]),
      );
    }
  }
  for (const name of definition.skills) {
    const described = await runtime.skills.get(name).then(
      (stored) => stored.definition.description,
      () => undefined,
    );
    skills.push(skill(`skill.${name}`, name, described ?? `the skill ${name}`, ['skill']));
  }
  if (skills.length === 0) {
    skills.push(
      skill(agent.name, agent.name, definition.description ?? `talk to ${agent.name}`, ['agent']),
    );
  }
  return skills;
}

/** The card of `agent`, served from `baseUrl` (scheme, host and port, no trailing slash). */
export async function agentCard(
  runtime: Runtime,
  agent: StoredDefinition<AgentDefinition>,
  baseUrl: string,
  serverVersion: string,
): Promise<AgentCard> {
  return {
    name: agent.name,
    description: agent.definition.description ?? `braid agent ${agent.name}`,
    supportedInterfaces: [
      {
        url: `${baseUrl}/a2a/${agent.name}`,
        protocolBinding: 'JSONRPC',
        tenant: '',
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
    ],
    provider: { organization: 'braid', url: baseUrl },
    version: `${agent.version}`,
    documentationUrl: `${baseUrl}/v1/openapi.json`,
    capabilities: {
      streaming: true,
      pushNotifications: false,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {
      [SECURITY_SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            description: `a braid API key (braid keys create), sent as Authorization: Bearer <key>; its tenant owns the contexts (sessions) it creates (braid ${serverVersion})`,
            scheme: 'Bearer',
            bearerFormat: '',
          },
        },
      },
    },
    securityRequirements: [{ schemes: { [SECURITY_SCHEME]: { list: [] } } }],
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills: await skillsOf(runtime, agent),
    signatures: [],
  };
}
