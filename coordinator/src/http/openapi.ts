import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { declarePublicScope } from './public-scope.js';

/**
 * OpenAPI 3 document generated from the zod schemas every route declares; served as JSON at
 * /openapi.json and browsable at /docs.
 */
export const openApiPlugin = fp(
  async function openApi(app: FastifyInstance, opts: { version: string; publicBaseUrl: string }) {
    await app.register(fastifySwagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Sonar coordinator API',
          version: opts.version,
          description:
            'Speech transcription queue, DNS zone editor, organization assistant connector, chat-log archive and platform endpoints. ' +
            'Errors use `{ok:false, reason, message, errors?}` except the chat-log archive (`{success:false, error}`).',
        },
        servers: [{ url: opts.publicBaseUrl }],
        components: {
          securitySchemes: {
            session: { type: 'apiKey', in: 'cookie', name: 'sonar_session', description: 'Browser session; mutations need X-CSRF-Token.' },
            bearerJwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'From POST /api/account/login.' },
            personalToken: { type: 'http', scheme: 'bearer', description: 'Personal access token (sonar_pat_…).' },
            dnsApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'DNS API key (sonar_dns_…); also as Bearer or ?api_key=.' },
            dnsApiKeyBasic: {
              type: 'http',
              scheme: 'basic',
              description: 'ACME routes only: a DNS API key as the HTTP Basic password, any user name (lego httpreq HTTPREQ_USERNAME/HTTPREQ_PASSWORD).',
            },
            dyndnsBasic: {
              type: 'http',
              scheme: 'basic',
              description: 'Dynamic-DNS update routes only: a dynamic-DNS token (sonar_ddns_…) as the HTTP Basic password, any user name.',
            },
          },
        },
      },
      transform: jsonSchemaTransform,
    });
    // The UI plugin's routes cannot carry config.auth: its own scope marks them public.
    await app.register(async (docs) => {
      declarePublicScope(docs);
      // Swagger UI's page has no viewport meta, so phones would lay it out 980 px wide and shrink
      // it; and its top bar's logo carries an inline <style>, allowed by its hash (nothing else
      // inline is: the page's scripts and stylesheets are files).
      const styleHashes = swaggerUiStyleHashes();
      docs.addHook('onSend', async (_request, reply, payload) => {
        const csp = reply.getHeader('content-security-policy');
        if (typeof csp === 'string' && styleHashes.length > 0) {
          void reply.header('content-security-policy', csp.replace(/style-src 'self'/, `style-src 'self' ${styleHashes.join(' ')}`));
        }
        return typeof payload === 'string' && String(reply.getHeader('content-type')).startsWith('text/html')
          ? payload.replace('<meta charset="UTF-8">', '<meta charset="UTF-8">\n      <meta name="viewport" content="width=device-width, initial-scale=1">')
          : payload;
      });
      await docs.register(fastifySwaggerUi, { routePrefix: '/docs' });
    });
    app.get('/openapi.json', { schema: { hide: true }, config: { auth: 'public' } }, async () => app.swagger());
  },
  { name: 'sonar-openapi' },
);

/**
 * CSP hashes ('sha256-…') of the inline <style> elements Swagger UI's bundles create (the top
 * bar's logo), read from the installed files so an upgrade keeps them right.
 */
function swaggerUiStyleHashes(): string[] {
  const staticDir = path.join(path.dirname(createRequire(import.meta.url).resolve('@fastify/swagger-ui')), 'static');
  const hashes = new Set<string>();
  for (const file of ['swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js']) {
    const source = readFileSync(path.join(staticDir, file), 'utf8');
    for (const match of source.matchAll(/createElement\("style",null,"([^"\\]*)"\)/g)) {
      hashes.add(
        `'sha256-${createHash('sha256')
          .update(match[1] ?? '')
          .digest('base64')}'`,
      );
    }
  }
  return [...hashes];
}
