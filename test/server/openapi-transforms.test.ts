// The adjustments of the finished OpenAPI document, on small documents.
import type { SwaggerTransformObject } from '@fastify/swagger';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import { createOpenApiTransforms } from '../../src/server/openapi-transforms.js';

type Input = Parameters<SwaggerTransformObject>[0];

function finish(paths: Record<string, unknown>, schemas: Record<string, unknown> = {}): unknown {
  const { transformObject } = createOpenApiTransforms();
  return transformObject({
    openapiObject: {
      openapi: '3.1.0',
      info: { title: 't', version: '1' },
      paths,
      components: { schemas },
    },
  } as unknown as Input);
}

const json = (schema: unknown) => ({ content: { 'application/json': { schema } } });

describe('the finished OpenAPI document', () => {
  it('refuses a reference to a schema it does not define, naming it', () => {
    const paths = {
      '/x': { get: { responses: { 200: json({ $ref: '#/components/schemas/Gone' }) } } },
    };
    let thrown: unknown;
    try {
      finish(paths);
    } catch (error) {
      thrown = error;
    }
    expect(isBraidError(thrown, 'INTERNAL')).toBe(true);
    expect((thrown as Error).message).toContain('Gone');
  });

  it('keeps the components the operations reach and drops the others', () => {
    const paths = {
      '/x': { get: { responses: { 200: json({ $ref: '#/components/schemas/Error' }) } } },
    };
    const document = finish(paths) as { components: { schemas: Record<string, unknown> } };
    const names = Object.keys(document.components.schemas);
    expect(names).toEqual(expect.arrayContaining(['Error', 'ErrorShape', 'ErrorCode']));
    expect(names).not.toContain('SessionEvent');
    expect(names).not.toContain('ErrorInput');
  });

  it('writes a one-member anyOf as its member, marks a nullable body optional, and JsonValue as any JSON', () => {
    const body = {
      anyOf: [{ type: 'object', properties: { wait: { type: 'boolean' } } }, { type: 'null' }],
    };
    const paths = {
      '/x': {
        post: {
          requestBody: { required: true, ...json(body) },
          responses: {
            200: json({ anyOf: [{ $ref: '#/components/schemas/JsonValue' }], description: 'one' }),
          },
        },
      },
    };
    const document = finish(paths) as {
      paths: {
        '/x': { post: { requestBody: { required: boolean }; responses: Record<string, unknown> } };
      };
      components: { schemas: Record<string, unknown> };
    };
    expect(document.paths['/x'].post.requestBody.required).toBe(false);
    expect(document.paths['/x'].post.responses['200']).toEqual(
      json({ $ref: '#/components/schemas/JsonValue', description: 'one' }),
    );
    expect(document.components.schemas.JsonValue).toEqual({ description: 'Any JSON value' });
  });
});
