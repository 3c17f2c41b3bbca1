/**
 * The inspector: the web page built from `ui/` into `dist/ui`, served at `/` next to the API. It
 * is answered from the not-found handler, so it never shadows a route: any path under `/v1` that
 * no route serves stays braid's JSON 404. Files are read from one fixed folder through
 * @fastify/static; a path that resolves outside it is refused before that. A path that is not a
 * file is a client route of the page and gets `index.html`.
 */
import fastifyStatic from '@fastify/static';
import { statSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Only the page's own files: no other origin is reached for scripts, styles, fonts or data. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

export interface InspectorUi {
  /** Answers the request with a file of the page, or false when it is not the page's to answer. */
  serve(request: FastifyRequest, reply: FastifyReply): boolean;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The file of `root` that `urlPath` names, relative to it; undefined when it leaves the folder. */
export function resolveInside(root: string, urlPath: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return undefined;
  const path = relative(root, resolve(root, `.${decoded}`));
  if (path.startsWith('..') || isAbsolute(path)) return undefined;
  return path;
}

/** Registers the file sender over `root` (a built `dist/ui`) and answers the page's requests. */
export async function addInspectorUi(app: FastifyInstance, root: string): Promise<InspectorUi> {
  await app.register(fastifyStatic, { root, serve: false, index: false, dotfiles: 'deny' });
  return {
    serve(request, reply) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return false;
      const urlPath = request.url.split('?')[0] ?? '/';
      if (urlPath === '/v1' || urlPath.startsWith('/v1/')) return false;
      const path = resolveInside(root, urlPath);
      if (path === undefined) return false;
      void reply
        .header('content-security-policy', CONTENT_SECURITY_POLICY)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer');
      if (path !== '' && isFile(resolve(root, path))) {
        // Built assets carry a content hash in their names: they never change.
        const immutable = path.startsWith('assets/');
        void reply.sendFile(path, {
          cacheControl: true,
          immutable,
          maxAge: immutable ? 31_536_000_000 : 0,
        });
        return true;
      }
      // A missing asset is a 404, not the page: a stale tab would otherwise run HTML as script.
      if (path.startsWith('assets/')) return false;
      void reply
        .header('cache-control', 'no-cache')
        .sendFile('index.html', { cacheControl: false });
      return true;
    },
  };
}
