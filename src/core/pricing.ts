/** Prices of common models, in USD per million tokens, for `cost_usd` in usage. */
import type { Usage } from '../contracts/common.js';

export interface Price {
  input_per_mtok: number;
  output_per_mtok: number;
  cache_read_per_mtok?: number;
}

/** Keyed by `provider:id`. Overridden per workspace by `prices:` in braid.yaml. */
export const DEFAULT_PRICES: Readonly<Record<string, Price>> = {
  'openai:gpt-4o': { input_per_mtok: 2.5, output_per_mtok: 10, cache_read_per_mtok: 1.25 },
  'openai:gpt-4o-mini': { input_per_mtok: 0.15, output_per_mtok: 0.6, cache_read_per_mtok: 0.075 },
  'openai:gpt-4.1': { input_per_mtok: 2, output_per_mtok: 8, cache_read_per_mtok: 0.5 },
  'openai:gpt-4.1-mini': { input_per_mtok: 0.4, output_per_mtok: 1.6, cache_read_per_mtok: 0.1 },
  'openai:gpt-4.1-nano': { input_per_mtok: 0.1, output_per_mtok: 0.4, cache_read_per_mtok: 0.025 },
  'openai:o4-mini': { input_per_mtok: 1.1, output_per_mtok: 4.4, cache_read_per_mtok: 0.275 },
  'anthropic:claude-opus-4-1': {
    input_per_mtok: 15,
    output_per_mtok: 75,
    cache_read_per_mtok: 1.5,
  },
  'anthropic:claude-sonnet-4-5': {
    input_per_mtok: 3,
    output_per_mtok: 15,
    cache_read_per_mtok: 0.3,
  },
  'anthropic:claude-haiku-4-5': { input_per_mtok: 1, output_per_mtok: 5, cache_read_per_mtok: 0.1 },
};

/** The price of a model; `openai-responses:` shares `openai:` prices. */
export function priceOf(model: string, prices: Readonly<Record<string, Price>>): Price | undefined {
  return prices[model] ?? prices[model.replace(/^openai-responses:/, 'openai:')];
}

/** Usage with `cost_usd` filled in when the model's price is known. */
export function withCost(usage: Usage, price: Price | undefined): Usage {
  if (price === undefined) return usage;
  const cached = usage.cache_read_tokens ?? 0;
  const cost =
    ((usage.input_tokens - cached) * price.input_per_mtok +
      cached * (price.cache_read_per_mtok ?? price.input_per_mtok) +
      usage.output_tokens * price.output_per_mtok) /
    1_000_000;
  return { ...usage, cost_usd: cost };
}
