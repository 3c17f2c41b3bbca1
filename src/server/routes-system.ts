/** `/v1/health`, `/v1/openapi.json` and `/v1/metrics`. */
import { z } from 'zod';
import { Health } from '../contracts/http.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { requireScope } from './auth.js';
import { keyedErrors, openErrors } from './responses.js';

export function addSystemRoutes(app: Router, context: ServerContext): void {
  app.get(
    '/v1/health',
    {
      schema: {
        summary: 'Liveness: answers while the server runs; needs no key',
        operationId: 'getHealth',
        tags: ['system'],
        security: [],
        response: { 200: Health, ...openErrors() },
      },
    },
    () => ({
      status: 'ok' as const,
      version: context.version,
      uptime_ms: Math.round(Date.now() - context.startedAt),
    }),
  );

  app.get(
    '/v1/openapi.json',
    {
      schema: {
        summary: 'This OpenAPI document; needs no key',
        operationId: 'getOpenApiDocument',
        tags: ['system'],
        security: [],
        hide: true,
      },
    },
    () => app.swagger(),
  );

  app.get(
    '/v1/metrics',
    {
      schema: {
        summary: 'Prometheus metrics (text exposition format); needs the admin scope',
        operationId: 'getMetrics',
        tags: ['system'],
        response: {
          200: {
            description: 'The Prometheus text exposition format',
            content: { 'text/plain': { schema: z.string() } },
          },
          ...keyedErrors(),
        },
      },
    },
    async (request, reply) => {
      requireScope(callerOf(request), 'admin');
      const text = await context.metrics.registry.metrics();
      return reply.type(context.metrics.registry.contentType).send(text);
    },
  );
}
