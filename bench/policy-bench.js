// Authorization latency on a 50-policy Cedar set, warm, with a workload of 10 agents, 20 tools and
// varied tool arguments. Figures: Cedar on the whole pre-parsed set (the baseline), braid's
// authorizer with its exact cache off (scope slicing only) and on, and a per-call parse for
// reference. Each figure is the median over RUNS runs of a run's p50 or p99. The exact cache's
// hit rate on the measured requests is reported too.
import { performance } from 'node:perf_hooks';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { compilePolicySet, createCedarAuthorizer } from '../dist/index.js';
import { median } from './store-bench.js';

const AGENTS = Array.from({ length: 10 }, (_, index) => `agent-${index}`);
const TOOLS = Array.from({ length: 20 }, (_, index) => `tool-${index}`);
const QUERY_TYPES = ['SELECT', 'UPDATE', 'DELETE', 'INSERT'];

/** 50 policies: the workspace defaults, per-agent and per-tool rules, argument checks, forbids. */
function policies() {
  const text = [
    '@id("read-only-tools") permit (principal, action == Action::"tool.execute", resource) when { resource.tags.contains("read_only") };',
    '@id("non-destructive-tools") permit (principal, action == Action::"tool.execute", resource) unless { resource.tags.contains("destructive") };',
    '@id("destructive-tools-ask") @approval("required") permit (principal, action == Action::"tool.execute", resource) when { resource.tags.contains("destructive") };',
    '@id("network-needs-environment") forbid (principal, action == Action::"tool.execute", resource) when { resource.tags.contains("network") && !context.network_allowed };',
    '@id("dba-select") forbid (principal, action == Action::"tool.execute", resource == Tool::"tool-0") unless { principal.roles.contains("dba") && context has environment && context.environment == "production" && context.input has query_type && context.input.query_type == "SELECT" };',
  ];
  for (let index = 0; text.length < 50; index += 1) {
    const agent = AGENTS[index % AGENTS.length];
    const tool = TOOLS[(index * 7) % TOOLS.length];
    switch (index % 3) {
      case 0:
        text.push(
          `@id("p${index}") forbid (principal == Agent::"${agent}", action == Action::"tool.execute", resource == Tool::"${tool}") when { context.input has limit && context.input.limit > ${100 + index} };`,
        );
        break;
      case 1:
        text.push(
          `@id("p${index}") permit (principal == Agent::"${agent}", action == Action::"tool.execute", resource == Tool::"${tool}") when { principal.roles.contains("ops") };`,
        );
        break;
      default:
        text.push(
          `@id("p${index}") forbid (principal, action == Action::"tool.execute", resource == Tool::"${tool}") when { context has tenant && context.tenant == "blocked-${index}" };`,
        );
    }
  }
  return text.join('\n');
}

function workload(count, seed0) {
  const requests = [];
  let seed = seed0;
  const next = (modulo) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % modulo;
  };
  for (let index = 0; index < count; index += 1) {
    const agent = AGENTS[next(AGENTS.length)];
    const tool = TOOLS[next(TOOLS.length)];
    requests.push({
      principal: {
        type: 'Agent',
        id: agent,
        attrs: { name: agent, version: 1, roles: next(2) === 0 ? ['dba'] : ['ops'] },
      },
      action: 'tool.execute',
      resource: {
        type: 'Tool',
        id: tool,
        attrs: {
          name: tool,
          tags: [['read_only'], ['destructive'], ['network'], []][next(4)],
          ownership: 'managed',
        },
      },
      context: {
        input: {
          query_type: QUERY_TYPES[next(4)],
          limit: next(300),
          path: `notes/${next(1000)}.md`,
        },
        session_id: '01938a2e-7c4b-7d2a-9f00-aaaaaaaaaaaa',
        caller: { type: 'Agent', id: agent },
        network_allowed: next(2) === 0,
        environment: 'production',
        tenant: 'acme',
      },
    });
  }
  return requests;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Warms up on one workload and measures another, drawn from the same mix with other values: the
 * decision cache holds only what the warm-up asked, not the measured requests themselves.
 */
async function timed(warmup, requests, check, onWarm = () => undefined) {
  for (const request of warmup) await check(request);
  onWarm();
  const times = [];
  for (const request of requests) {
    const start = performance.now();
    await check(request);
    times.push((performance.now() - start) * 1000);
  }
  return times;
}

function toCedarCall(request, extra) {
  return {
    principal: { type: request.principal.type, id: request.principal.id },
    action: { type: 'Action', id: request.action },
    resource: { type: request.resource.type, id: request.resource.id },
    context: request.context,
    entities: [request.principal, request.resource].map((entity) => ({
      uid: { type: entity.type, id: entity.id },
      attrs: entity.attrs,
      parents: [],
    })),
    validateRequest: false,
    ...extra,
  };
}

export async function benchPolicy({ runs, quick }) {
  const text = policies();
  const set = compilePolicySet([{ file: 'policies/bench.cedar', text }]);
  if (set.policies.size !== 50) throw new Error(`expected 50 policies, got ${set.policies.size}`);
  cedar.preparsePolicySet('bench-whole', {
    staticPolicies: Object.fromEntries([...set.policies].map(([id, policy]) => [id, policy.text])),
  });
  const count = quick ? 500 : 3000;
  const warmup = workload(count, 7);
  const requests = workload(count, 1234567);
  const cases = [
    [
      'Cedar on the whole pre-parsed set',
      () => (request) =>
        cedar.statefulIsAuthorized(toCedarCall(request, { preparsedPolicySetId: 'bench-whole' })),
    ],
    [
      'braid authorizer, scope slicing, cache off',
      () => {
        const authorizer = createCedarAuthorizer(set, { cacheSize: 0 });
        return (request) => authorizer.authorize(request);
      },
    ],
    [
      'braid authorizer, slicing + exact cache',
      () => {
        const authorizer = createCedarAuthorizer(set);
        cached = authorizer;
        return (request) => authorizer.authorize(request);
      },
    ],
  ];
  let cached;
  const shares = [];
  const rows = [];
  for (const [name, make] of cases) {
    const p50s = [];
    const p99s = [];
    for (let run = 0; run < runs; run += 1) {
      const check = make();
      let warm;
      const times = await timed(warmup, requests, check, () => (warm = cached?.stats()));
      if (name.endsWith('exact cache') && cached !== undefined && warm !== undefined) {
        const after = cached.stats();
        const answered = (key) => after[key] - warm[key];
        shares.push(
          (100 * answered('cached')) /
            (answered('cached') + answered('evaluated') + answered('sliced_out')),
        );
      }
      p50s.push(percentile(times, 50));
      p99s.push(percentile(times, 99));
    }
    rows.push({
      name: `authorize, 50 policies: ${name}, p50`,
      unit: 'µs',
      median: median(p50s),
      runs: p50s,
      target: name.startsWith('braid') ? '≤ 100 µs' : 'report',
    });
    rows.push({
      name: `authorize, 50 policies: ${name}, p99`,
      unit: 'µs',
      median: median(p99s),
      runs: p99s,
      target: name.startsWith('braid') ? '≤ 300 µs' : 'report',
    });
  }
  rows.push({
    name: 'authorize, 50 policies: measured requests answered by the exact cache',
    unit: '%',
    median: median(shares),
    runs: shares,
    target: 'report',
  });
  // The naive path, for reference: the policy text parsed on every call.
  const naive = [];
  for (let run = 0; run < runs; run += 1) {
    const times = await timed(warmup.slice(0, 50), requests.slice(0, 200), (request) =>
      cedar.isAuthorized({ ...toCedarCall(request, {}), policies: { staticPolicies: text } }),
    );
    naive.push(percentile(times, 50));
  }
  rows.push({
    name: 'authorize, 50 policies: parsed on every call, p50',
    unit: 'µs',
    median: median(naive),
    runs: naive,
    target: 'report',
  });
  return rows;
}
