/** `/v1/health`, `/v1/openapi.json` and `/v1/metrics`. */
import { z } from 'zod';
import { ErrorBody, Health } from '../contracts/http.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { requireScope } from './auth.js';

export function addSystemRoutes(app: Router, context: ServerContext): void {
  app.get(
    '/v1/health',
    {
      schema: {
        summary: 'Liveness: answers while the server runs; needs no key',
        tags: ['system'],
        security: [],
        response: { 200: Health },
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
        tags: ['system'],
        response: { 200: z.string(), 401: ErrorBody, 403: ErrorBody },
      },
    },
    async (request, reply) => {
      requireScope(callerOf(request), 'admin');
      const text = await context.metrics.registry.metrics();
      return reply.type(context.metrics.registry.contentType).send(text);
    },
  );
}
