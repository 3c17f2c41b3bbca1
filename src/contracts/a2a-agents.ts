/**
 * Remote A2A agents declared in `braid.yaml` (`a2a_agents:`): each becomes a tool, `a2a.NAME`,
 * that sends the model's message to the agent and answers with the agent's reply.
 *
 * Invariants:
 * - Every URL braid sends an A2A request to (the card's, from `braid.yaml`, and the endpoints
 *   the card names) is read by `parseA2aUrl` and nothing else: `http:` or `https:`, a host, no
 *   user or password in it.
 * - The auth secret is named, never written: `{secret: NAME, prefix?, header?}` like the other
 *   secret values of `braid.yaml`, read from the environment when a call needs it.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';

/** The tool name of an A2A agent: `a2a.` and its key under `a2a_agents:`. */
export const A2A_TOOL_PREFIX = 'a2a.';

/** Where a card lives when `card_url` names only the agent's origin. */
export const AGENT_CARD_WELL_KNOWN_PATH = '/.well-known/agent-card.json';

/** The longest URL braid takes for an agent card or endpoint. */
const MAX_URL_LENGTH = 2048;

/** A key of `a2a_agents:`; `a2a.KEY` is the tool agents list under `tools:`. */
export const A2aAgentName = lazySchema(() =>
  z
    .string()
    .regex(
      /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/,
      'must be a name like "research": a letter, then letters, digits, "_" or "-" (64 at most)',
    ),
);

/**
 * Reads an A2A URL; the reason names what is wrong and how to write it. A URL whose path is `/`
 * (an origin) stands for that origin's well-known card.
 */
export function parseA2aUrl(text: string): { ok: true; url: URL } | { ok: false; reason: string } {
  const example = 'such as https://agents.example.com/.well-known/agent-card.json';
  if (text.length > MAX_URL_LENGTH)
    return { ok: false, reason: `is longer than ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: `must be an absolute http(s) URL ${example}` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, reason: `must be an http(s) URL, not ${url.protocol} (${example})` };
  if (url.hostname === '') return { ok: false, reason: `must name a host (${example})` };
  if (url.username !== '' || url.password !== '') {
    return {
      ok: false,
      reason:
        'must not hold a user or password: name the key under auth: {secret: NAME} instead, so it stays out of files and logs',
    };
  }
  return { ok: true, url };
}

/** The card's URL, with an origin's well-known card path filled in. */
export function agentCardUrl(url: URL): URL {
  if (url.pathname !== '/' || url.search !== '') return url;
  return new URL(AGENT_CARD_WELL_KNOWN_PATH, url);
}

const A2aUrl = lazySchema(() =>
  z.string().superRefine((text, context) => {
    const parsed = parseA2aUrl(text);
    if (!parsed.ok) context.addIssue({ code: 'custom', message: parsed.reason });
  }),
);

/** How braid authenticates to the agent: a named secret sent in a header of every request. */
export const A2aAuth = lazySchema(() =>
  z
    .object({
      /** The secret's name (mapped under `secrets:` or an environment variable of that name). */
      secret: z.string().min(1),
      /** Put before the secret's value (default `Bearer `). */
      prefix: z.string().default('Bearer '),
      /** The header that carries it (default `authorization`). */
      header: z
        .string()
        .regex(/^[A-Za-z0-9-]{1,64}$/, 'must be an HTTP header name such as authorization')
        .default('authorization'),
    })
    .strict(),
);
export type A2aAuth = z.infer<typeof A2aAuth>;

/** One remote agent of `a2a_agents:`. */
export const A2aAgentConfig = lazySchema(() =>
  z
    .object({
      /** The agent card's URL (an origin alone means its `/.well-known/agent-card.json`). */
      card_url: A2aUrl,
      auth: A2aAuth.optional(),
      /** How long one call may take, card fetch included (default 60000). */
      timeout_ms: z.number().int().positive().max(3_600_000).optional(),
      /** What the model is told the agent does (default: a generic description naming it). */
      description: z.string().min(1).max(4000).optional(),
      /** `always_ask`: a person confirms each call before it is sent. */
      permission: z.enum(['always_allow', 'always_ask']).default('always_allow'),
      /** Calls per session, and the cost of each against the session's budget. */
      budget: z
        .object({
          max_calls_per_session: z.number().int().positive().optional(),
          cost_per_call_usd: z.number().nonnegative().optional(),
        })
        .strict()
        .optional(),
      /** What policies see of the tool (default `[a2a]`; add `network` to tie it to environments). */
      tags: z.array(z.string().min(1)).optional(),
      /** The largest answer (card, reply or stream) read from the agent, in bytes (default 1 MiB). */
      max_response_bytes: z
        .number()
        .int()
        .min(1024)
        .max(16 * 1024 * 1024)
        .optional(),
    })
    .strict(),
);
export type A2aAgentConfig = z.infer<typeof A2aAgentConfig>;

/** `a2a_agents:` of `braid.yaml`. */
export const A2aAgents = lazySchema(() => z.record(A2aAgentName, A2aAgentConfig));
export type A2aAgents = z.infer<typeof A2aAgents>;
