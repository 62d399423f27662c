import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { declarePublicScope } from '../accounts/auth-plugin.js';

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
      await docs.register(fastifySwaggerUi, { routePrefix: '/docs', staticCSP: true });
    });
    app.get('/openapi.json', { schema: { hide: true }, config: { auth: 'public' } }, async () => app.swagger());
  },
  { name: 'sonar-openapi' },
);
