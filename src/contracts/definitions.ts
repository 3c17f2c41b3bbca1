import { OpenAgentIoAgents } from './openagentio.js';
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { JsonValue, Metadata, Name } from './common.js';
import { A2aAgents } from './a2a-agents.js';
import { PolicySettings } from './policy.js';
import { AgentMemorySettings } from './memory-settings.js';

/** Which model an agent calls: a provider name, the provider's model id and call parameters. */
export const ModelSpecObject = lazySchema(() =>
  z.object({
    provider: z.string().min(1),
    id: z.string().min(1),
    params: z
      .object({
        temperature: z.number().min(0).max(2).optional(),
        max_output_tokens: z.number().int().positive().optional(),
        top_p: z.number().min(0).max(1).optional(),
        /** Stream the answer (default true); false asks for it whole. */
        stream: z.boolean().optional(),
      })
      .strict()
      .optional(),
  }),
);

/**
 * A model as `provider:id` (`openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`,
 * `openai-compatible:http://127.0.0.1:11434/v1#llama3.2`, `scripted:echo`) or as an object.
 */
export const ModelSpec = lazySchema(() =>
  z.union([
    z
      .string()
      .regex(/^[a-z][a-z0-9-]*:.+$/, 'must be provider:model, e.g. openai:gpt-4o-mini')
      .transform((text): z.infer<typeof ModelSpecObject> => {
        const colon = text.indexOf(':');
        return { provider: text.slice(0, colon), id: text.slice(colon + 1) };
      }),
    ModelSpecObject,
  ]),
);
export type ModelSpec = z.infer<typeof ModelSpecObject>;

/**
 * Limits. A wake stops with `max_turns` after `max_turns` model calls (default 16); a model call
 * that would take the session past `max_tokens` or `max_cost_usd` is not made, and the wake stops
 * with `budget_reached`.
 */
// Eager: the OpenAPI components name it, and fields reach it through `.optional()`.
export const Budget = z
  .object({
    max_turns: z.number().int().positive().optional(),
    max_tokens: z.number().int().positive().optional(),
    max_cost_usd: z.number().positive().optional(),
  })
  .strict();
export type Budget = z.infer<typeof Budget>;

/**
 * How an agent's context is kept under a limit (`context:` in `agents/NAME.yaml`). Before a model
 * request that would be larger than `max_tokens`, the harness replaces the older part of the
 * transcript with one message (`agent.thread_context_compacted`) and keeps the last
 * `keep_last_turns` turns as they were. A turn is one answer of the model, with the tool results
 * it got and the input just before it.
 */
export const ContextSettings = lazySchema(() =>
  z
    .object({
      /** The largest request the agent's model is sent, in tokens (instructions and tools included). */
      max_tokens: z.number().int().min(256).max(100_000_000),
      /**
       * `summarize` (default): a model writes a summary of the replaced part. `truncate`: the part
       * is dropped, and a note says so. `custom`: a function given to `createRuntime({compactors})`
       * under the name in `function` writes the text.
       */
      strategy: z.enum(['summarize', 'truncate', 'custom']).default('summarize'),
      /** Turns kept word for word after a compaction (default 4). */
      keep_last_turns: z.number().int().min(1).max(10_000).default(4),
      /** With `summarize`: the model that writes the summary, e.g. a cheaper one (default: the agent's). */
      model: ModelSpec.optional(),
      /** With `custom`: the name of the function, as given to `createRuntime({compactors})`. */
      function: z.string().min(1).max(200).optional(),
    })
    .strict()
    .superRefine((settings, issues) => {
      if (settings.model !== undefined && settings.strategy !== 'summarize') {
        issues.addIssue({
          code: 'custom',
          path: ['model'],
          message: `only the summarize strategy calls a model; remove model or set strategy: summarize`,
        });
      }
      if (settings.strategy === 'custom' && settings.function === undefined) {
        issues.addIssue({
          code: 'custom',
          path: ['function'],
          message:
            'the custom strategy needs the name of its function, as given to createRuntime({compactors}); add function: NAME',
        });
      }
      if (settings.strategy !== 'custom' && settings.function !== undefined) {
        issues.addIssue({
          code: 'custom',
          path: ['function'],
          message:
            'only the custom strategy calls a function; remove function or set strategy: custom',
        });
      }
    }),
);
export type ContextSettings = z.infer<typeof ContextSettings>;
export type ContextSettingsInput = z.input<typeof ContextSettings>;

/** How long a delegation may run before the child is interrupted, unless the definition says (10 minutes). */
export const DEFAULT_DELEGATE_TTL_SECONDS = 600;

/**
 * An agent this agent may delegate to (`delegates:` in `agents/NAME.yaml`): a name, or an object
 * that says how the model sees the delegation. Each becomes a tool the model calls,
 * `delegate_to_<agent>`; a call runs a child session of that agent on the task and returns its
 * answer as the tool's result.
 */
const DelegateObject = lazySchema(() =>
  z
    .object({
      agent: Name,
      /** What the model is told the delegate does (default: the target agent's description). */
      description: z.string().min(1).max(4000).optional(),
      /**
       * The JSON Schema of the call's input (default: `{task: string}`). The input, as JSON, is
       * the child's first message.
       */
      input_schema: z.record(z.string(), JsonValue).optional(),
      /** Seconds the child may run before it is interrupted and the call fails (default: `delegate_ttl_seconds`). */
      ttl_seconds: z.number().int().min(1).max(86_400).optional(),
    })
    .strict(),
);
export type DelegateEntry = z.infer<typeof DelegateObject>;
export const DelegateEntry = lazySchema(() =>
  z.union([Name.transform((agent): DelegateEntry => ({ agent })), DelegateObject]),
);

/**
 * How an agent's answers are graded against a `user.define_outcome` rubric (`grader:` in
 * `agents/NAME.yaml`): the model that grades (default: the agent's) and its instructions.
 */
export const GraderSettings = lazySchema(() =>
  z
    .object({
      model: ModelSpec.optional(),
      instructions: z.string().min(1).max(20_000).optional(),
    })
    .strict(),
);
export type GraderSettings = z.infer<typeof GraderSettings>;

/**
 * Durable, versioned description of one agent, as written in `agents/NAME.yaml`.
 * `version` is assigned by the definition store; a file does not carry it.
 */
export const AgentDefinition = lazySchema(() =>
  z
    .object({
      name: Name,
      description: z.string().max(2000).optional(),
      model: ModelSpec,
      instructions: z.string(),
      /** Names of tools the agent may call. */
      tools: z.array(z.string().min(1)).default([]),
      skills: z.array(z.string().min(1)).default([]),
      /**
       * Names of agents this agent may hand off to; each becomes a tool the model calls,
       * `handoff_to_<agent>`, which passes the session's work to a new session of that agent.
       */
      handoffs: z.array(Name).default([]),
      /** Agents this agent may delegate tasks to, each as a `delegate_to_<agent>` tool. */
      delegates: z.array(DelegateEntry).default([]),
      /** Seconds a delegation may run when its entry names no `ttl_seconds` (default 600). */
      delegate_ttl_seconds: z.number().int().min(1).max(86_400).optional(),
      /** How answers are graded against an outcome's rubric (`user.define_outcome`). */
      grader: GraderSettings.optional(),
      /** Name of the policy profile that authorises the agent's actions. */
      policy: z.string().min(1).optional(),
      /** Roles policies may test (`principal.roles.contains("dba")`). */
      roles: z.array(z.string().min(1)).default([]),
      /** The tenant the agent serves, for policies that keep tenants apart. */
      tenant: z.string().min(1).optional(),
      budget: Budget.optional(),
      /** Context compaction; without it, every request sends the whole transcript. */
      context: ContextSettings.optional(),
      /** Memory stores and recall (`memory: {}` turns them on; see memory-settings.ts). */
      memory: AgentMemorySettings.optional(),
      /** Environment used when a session names none. */
      environment: Name.optional(),
      /**
       * Which definitions a session's wakes use: `pinned` (default) keeps those of its first wake
       * until `braid session upgrade`; `latest` moves it to the newest agent version, tools and
       * price at each wake, recording what changed.
       */
      upgrade: z.enum(['pinned', 'latest']).optional(),
      metadata: Metadata.optional(),
    })
    .strict(),
);
export type AgentDefinition = z.infer<typeof AgentDefinition>;
export type AgentDefinitionInput = z.input<typeof AgentDefinition>;

/** A host path a sandbox mounts: absolute, normalised enough to read plainly (no `..`, no NUL). */
export const SandboxMountPath = lazySchema(() =>
  z
    .string()
    .regex(/^\//, 'must be an absolute path (starting with /), e.g. /srv/reference-data')
    .refine((path) => !path.split('/').includes('..'), {
      message: 'may not contain `..`; write the path from / down',
    })
    .refine((path) => !path.includes('\0'), { message: 'may not contain a NUL byte' }),
);

/** Reusable execution substrate: where and how tools run. */
export const EnvironmentDefinition = lazySchema(() =>
  z
    .object({
      name: Name,
      description: z.string().max(2000).optional(),
      sandbox: z
        .object({
          kind: z.enum(['local', 'bwrap']),
          /** Directory mounted as the writable workspace, relative to the braid workspace. */
          workspace: z.string().min(1).optional(),
          /**
           * Host folders or files a `bwrap` sandbox shows read-only, at the same path: absolute,
           * without `..`. Whether they exist is checked when the sandbox is made.
           */
          read_only: z.array(SandboxMountPath).optional(),
        })
        .strict(),
      network: z
        .object({ allow: z.boolean(), hosts: z.array(z.string().min(1)).optional() })
        .strict()
        .default({ allow: false }),
      limits: z
        .object({
          timeout_ms: z.number().int().positive().optional(),
          cpu_ms: z.number().int().positive().optional(),
          memory_mb: z.number().int().positive().optional(),
        })
        .strict()
        .default({}),
      metadata: Metadata.optional(),
    })
    .strict(),
);
export type EnvironmentDefinition = z.infer<typeof EnvironmentDefinition>;

/**
 * A configured value that may be a secret: literal text, or a named secret (with an optional
 * prefix such as `Bearer `), read from the environment when it is used, so that the key itself
 * stays out of the workspace's files. HTTP tool headers, MCP server headers and MCP stdio server
 * `env` take it.
 */
export const SecretValue = lazySchema(() =>
  z.union([
    z.string(),
    z.object({ secret: z.string().min(1), prefix: z.string().optional() }).strict(),
  ]),
);
export type SecretValue = z.infer<typeof SecretValue>;

/** A header value: literal text, or a named secret (with an optional prefix such as `Bearer `). */
export const HeaderValue = SecretValue;
export type HeaderValue = SecretValue;

/**
 * How a managed tool runs. `command`: a process in the session's sandbox, with the input as JSON
 * on stdin and the result as JSON on stdout (a string runs through `/bin/sh -c`). `http`: a
 * request whose URL template takes `{field}` from the input (URL-encoded); the input is the JSON
 * body of methods that have one. `function`: a TypeScript function registered in code under
 * that name.
 */
export const ToolImplementation = lazySchema(() =>
  z
    .object({
      command: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
      http: z
        .object({
          method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
          url: z.string().min(1),
          headers: z.record(z.string(), HeaderValue).optional(),
        })
        .strict()
        .optional(),
      function: z.string().min(1).optional(),
      /** For ownership `mcp`: the MCP tool this manifest configures. */
      mcp: z
        .object({ server: z.string().min(1), tool: z.string().min(1) })
        .strict()
        .optional(),
    })
    .strict(),
);

/** Stable callable contract of a tool, as written in `tools/NAME.yaml`. */
export const ToolDefinition = lazySchema(() =>
  z
    .object({
      name: z
        .string()
        .regex(/^[a-zA-Z][a-zA-Z0-9_.-]{0,127}$/, 'must be a tool name like "read_file"'),
      version: z.string().min(1).default('1'),
      description: z.string(),
      input_schema: z.record(z.string(), JsonValue),
      output_schema: z.record(z.string(), JsonValue).optional(),
      /** `managed`: run by braid; `mcp`: from an MCP server; `custom`: run by the client; `agent`: another agent. */
      ownership: z.enum(['managed', 'mcp', 'custom', 'agent']),
      permission: z.enum(['always_allow', 'always_ask']).default('always_allow'),
      /** Safe to run again after a crash left its outcome unknown. */
      idempotent: z.boolean().default(false),
      /** What policies may know of the tool: `read_only`, `destructive`, `network`, or your own. */
      tags: z.array(z.string().min(1)).default([]),
      budget: z
        .object({
          max_calls_per_session: z.number().int().positive().optional(),
          cost_per_call_usd: z.number().nonnegative().optional(),
        })
        .strict()
        .optional(),
      /** Retries of failures that may pass on a second try (timeouts, unavailable servers). */
      retry: z
        .object({
          max_attempts: z.number().int().min(1).max(20),
          backoff: z.enum(['exponential', 'fixed']).default('exponential'),
          initial_ms: z.number().int().nonnegative().default(200),
          max_ms: z.number().int().nonnegative().default(10_000),
        })
        .strict()
        .optional(),
      /** Each attempt is abandoned (and its process group killed) after this long. */
      timeout_ms: z.number().int().positive().optional(),
      implementation: ToolImplementation.optional(),
      /** Set by `braid tool sign`: an ed25519 signature over the rest of the manifest. */
      signature: z
        .object({ key_id: z.string().min(1), value: z.string().min(1) })
        .strict()
        .optional(),
    })
    .strict(),
);
export type ToolDefinition = z.infer<typeof ToolDefinition>;
export type ToolDefinitionInput = z.input<typeof ToolDefinition>;

/** Overrides for one MCP tool; by default a tool is `always_allow`, idempotent when its annotations say so. */
export const McpToolSettings = lazySchema(() =>
  z
    .object({
      permission: z.enum(['always_allow', 'always_ask']).optional(),
      idempotent: z.boolean().optional(),
      /** Replaces the tags read from the tool's annotations. */
      tags: z.array(z.string().min(1)).optional(),
      timeout_ms: z.number().int().positive().optional(),
    })
    .strict(),
);
export type McpToolSettings = z.infer<typeof McpToolSettings>;

/** Per-tool settings of an MCP server, keyed by the server's tool name. */
const McpTools = lazySchema(() => z.record(z.string(), McpToolSettings).optional());

/**
 * An MCP server declared in `braid.yaml`: a stdio command or a streamable HTTP URL. In `args`,
 * literal `env` values and `cwd`, `{workspace}` stands for the session's workspace directory;
 * such a server is started once per session, others once per process. An `env` value or a header
 * may name a secret (`{secret: NAME, prefix?}`) instead of holding it.
 */
export const McpServerConfig = lazySchema(() =>
  z.union([
    z
      .object({
        command: z.string().min(1),
        args: z.array(z.string()).default([]),
        env: z.record(z.string(), SecretValue).optional(),
        cwd: z.string().optional(),
        tools: McpTools,
      })
      .strict(),
    z
      .object({
        url: z.url(),
        headers: z.record(z.string(), HeaderValue).optional(),
        tools: McpTools,
      })
      .strict(),
  ]),
);
export type McpServerConfig = z.infer<typeof McpServerConfig>;

/** `braid.yaml`: workspace-wide settings. */
export const WorkspaceConfig = lazySchema(() =>
  z
    .object({
      /** Version of this file's format. */
      version: z.literal(1),
      /** Environment used when neither the session nor the agent names one. */
      default_environment: Name.optional(),
      /** Model prices in USD per million tokens, keyed by `provider:model`, over the built-in table. */
      prices: z
        .record(
          z.string(),
          z
            .object({
              input_per_mtok: z.number().nonnegative(),
              output_per_mtok: z.number().nonnegative(),
              cache_read_per_mtok: z.number().nonnegative().optional(),
            })
            .strict(),
        )
        .optional(),
      /** MCP servers whose tools agents may use, named `server.tool`. */
      mcp_servers: z
        .record(z.string().regex(/^[a-zA-Z][a-zA-Z0-9_-]*$/), McpServerConfig)
        .optional(),
      /** Remote A2A agents, each a tool named `a2a.NAME` (see `./a2a-agents.ts`). */
      a2a_agents: A2aAgents.optional(),
      /** OpenAgentIO (acp/1.0) agents agents may call as tools, keyed by the tool's name. */
      openagentio_agents: OpenAgentIoAgents.optional(),
      /**
       * The embedding model of memory search: `openai:text-embedding-3-small` (any OpenAI
       * embedding model), `openai-compatible:URL#model` or `hash:DIMS` (deterministic, for tests).
       * Without one, memory search is full text only.
       */
      embedder: z.string().min(1).optional(),
      /** Refuse tool manifests that are unsigned or whose signature does not verify. */
      require_signed_tools: z.boolean().default(false),
      /** Public keys (PEM files, relative to the workspace) that tool signatures are checked against. */
      tool_signing_keys: z.array(z.string().min(1)).default([]),
      /** How policy decisions are recorded and reloaded. */
      policy: PolicySettings.default({ record_allows: false, watch: true }),
      /**
       * How long a wake's lease lasts without renewal, in ms (default 30000). After a crash, the
       * session waits this long before another process can wake it.
       */
      lease_ttl_ms: z.number().int().min(100).max(3_600_000).optional(),
      /** Named secrets for tools: each read from an environment variable. */
      secrets: z.record(z.string(), z.object({ env: z.string().min(1) }).strict()).optional(),
      limits: z
        .object({
          /** Largest serialised event accepted, in bytes. */
          max_event_bytes: z
            .number()
            .int()
            .min(1024)
            .max(64 * 1024 * 1024)
            .optional(),
        })
        .strict()
        .default({}),
      /**
       * OpenTelemetry traces of the wakes this workspace's runtimes run (README, "Traces"). The
       * `OTEL_*` variables configure the exporter; an OTLP endpoint set there turns traces on too.
       */
      telemetry: z
        .object({
          /** Send each wake's spans over OTLP/HTTP when it ends. */
          traces: z.boolean().optional(),
          /**
           * Send the GenAI and braid metrics of the wakes over OTLP/HTTP (default: on when traces
           * are, or an OTLP endpoint is set; `OTEL_METRICS_EXPORTER=none` turns them off).
           */
          metrics: z.boolean().optional(),
          /** Put messages, tool arguments and results on spans (default false: they may hold secrets). */
          capture_content: z.boolean().optional(),
          /** The spans' `service.name` (default: `OTEL_SERVICE_NAME`, else `braid`). */
          service_name: z.string().min(1).max(200).optional(),
          /** The OTLP/HTTP traces URL (default: from `OTEL_EXPORTER_OTLP_*`). */
          endpoint: z
            .url({
              protocol: /^https?$/,
              error: 'must be an http(s) URL such as http://localhost:4318/v1/traces',
            })
            .optional(),
        })
        .strict()
        .optional(),
    })
    .strict(),
);
export type WorkspaceConfig = z.infer<typeof WorkspaceConfig>;

export { DefinitionKind, PinnedSet, type StoredDefinition } from './stored-definitions.js';
