import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import fastifyHelmet from '@fastify/helmet';
import fastifyRateLimit from '@fastify/rate-limit';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { AccountService } from './accounts/account-service.js';
import { credentialChanges } from './accounts/credential-cache.js';
import { authPlugin, enforceRouteAuth } from './accounts/auth-plugin.js';
import { accountsPlugin } from './accounts/plugin.js';
import { PgSessionStore } from './accounts/session-store.js';
import { assistantPlugin } from './assistant/plugin.js';
import { consolePlugin } from './console/plugin.js';
import { dnsPlugin } from './dns/plugin.js';
import { dnsProvidersPage } from './dns/providers/admin-page.js';
import { assetsPlugin } from './http/assets.js';
import { sendErrorPage } from './http/page.js';
import { clientErrorHandler, errorShapeOf, installDomainErrors, isReaderPage, normalizeError, okReasonBody, sendError } from './http/errors.js';
import { withRedaction } from './http/log-redaction.js';
import { Metrics, metricsPlugin } from './http/metrics.js';
import { openApiPlugin } from './http/openapi.js';
import { redisWithFallbackStore } from './http/rate-limit-store.js';
import { syncedRateLimit } from './http/rate-limits.js';
import { ircPlugin, isIrcApiUrl } from './irc/plugin.js';
import { platformPlugin } from './platform/plugin.js';
import { DyndnsTokens } from './platform/dyndns/dyndns-token-repository.js';
import { speechPlugin } from './speech/plugin.js';
import { WorkerRegistry } from './speech/workers/worker-registry.js';
import { createSpeechServices } from './speech/speech-services.js';
import { jobCountsByStatus } from './speech/jobs/job-metrics.js';
import { attachLiveHub } from './speech/live/attach.js';
import { NO_PROVIDER_REASON } from './speech/ai/provider.js';
import type { AppDeps, DomainDeps } from './deps.js';

/**
 * The Fastify application, without listening: tests drive it with app.inject(), main.ts and the
 * quick start call listen(). Order matters: rate limit (onRequest) → auth (preValidation) →
 * zod validation → handler → zod response serialization.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, orm, redis, version } = deps;
  const metrics = deps.metrics ?? new Metrics();
  const app = Fastify({
    logger: deps.logger === false ? false : withRedaction(typeof deps.logger === 'object' ? deps.logger : { level: config.LOG_LEVEL }),
    // A hop count is valid for Fastify (proxy-addr) even though its types only list the other forms.
    trustProxy: config.TRUST_PROXY as boolean | string[],
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    // Errors the router raises before any route or hook runs (a malformed percent-encoding, a path
    // parameter over maxParamLength): the documented body of the area the URL belongs to.
    // The chat-log reader's pages get the console's HTML error page, as their own errors do.
    frameworkErrors: (error, request, reply) => {
      const e = normalizeError(error, request);
      if (isReaderPage(request.url)) void sendErrorPage(request, reply, e);
      else void sendError(reply, e, errorShapeOf(request.url));
    },
    // Errors of Node's HTTP parser (an oversized request line: 431) likewise.
    clientErrorHandler,
  });
  // Before anything registers a route: a route that declares no config.auth fails to register.
  enforceRouteAuth(app);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.addHook('onSend', async (request, reply) => {
    void reply.header('x-request-id', request.id);
  });

  // Credential lookups are reused for AUTH_CACHE_SECONDS (changes through this process apply at once).
  const accounts = new AccountService(orm, { credentialCacheMs: config.AUTH_CACHE_SECONDS * 1000 });
  // Changes through another coordinator or the admin CLI arrive over Redis pub/sub (credential-cache.ts).
  const disconnectCredentials = await credentialChanges.connect(redis, `${config.REDIS_KEY_PREFIX}auth:credentials-changed`, app.log);
  app.addHook('onClose', disconnectCredentials);
  const sessionStore = new PgSessionStore(orm, config.SESSION_TTL_SECONDS * 1000);
  const workers = deps.workers ?? new WorkerRegistry(orm, redis, config);
  metrics.setWorkerPresence(workers);
  const speech = deps.speech ?? createSpeechServices({ orm, redis, config });
  // Said once, as information: without a provider, analysis, translations and automatic titles are off (not an error per job).
  if (!speech.ai) app.log.info(`${NO_PROVIDER_REASON} Transcript analysis, translations and automatic titles are off.`);
  const domainDeps: DomainDeps = { config, orm, redis, accounts, metrics, workers, speech, version };
  metrics.setSpeechQueue(() => jobCountsByStatus(orm));

  await app.register(fastifyHelmet, {
    // A fresh nonce per response (reply.cspNonce): pages mark their <script> tags with it, so no
    // other inline script runs. Styles come from the bundled stylesheet only.
    enableCSPNonces: true,
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        fontSrc: ["'self'"],
        // socket.io (same origin, ws: or wss:), fetch and tus uploads.
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
    },
    referrerPolicy: { policy: 'same-origin' },
    // Cross-origin isolation would refuse nothing this console loads, but also gains it nothing.
    crossOriginEmbedderPolicy: false,
  });
  await app.register(assetsPlugin);
  if (config.OPENAPI_ENABLED) await app.register(openApiPlugin, { version, publicBaseUrl: config.PUBLIC_BASE_URL });
  await app.register(fastifyRateLimit, {
    global: false,
    // Redis counts for every coordinator; while it is down each coordinator counts on its own
    // (never no limit at all: the sign-in budget must hold through a Redis outage).
    // Read routes' counters are synced with Redis every 250 ms instead of one round trip per request.
    store: redisWithFallbackStore(redis, `${config.REDIS_KEY_PREFIX}rl:`, app.log, { synced: syncedRateLimit }),
  });
  await app.register(metricsPlugin, { config, metrics });
  const dyndnsTokens = new DyndnsTokens(orm);
  await app.register(authPlugin, { config, accounts, sessionStore, dyndnsTokens: (secret) => dyndnsTokens.verify(secret) });

  installDomainErrors(app, okReasonBody);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    // A browser asking for a page that does not exist gets the console's error page.
    const accept = request.headers.accept ?? '';
    if (request.method === 'GET' && accept.includes('text/html') && !path.startsWith('/api/') && !isIrcApiUrl(path)) {
      return sendErrorPage(request, reply, { status: 404, reason: 'not_found', message: `There is no page at ${path}.` });
    }
    return reply
      .code(404)
      .send(
        isIrcApiUrl(request.url) ? { success: false, error: 'Not found.' } : { ok: false, reason: 'not_found', message: `No route ${request.method} ${path}.` },
      );
  });

  await app.register(platformPlugin, { version, outbound: speech.outbound, orm, redis, config, accounts, dyndnsTokens });
  await app.register(accountsPlugin, domainDeps);
  await app.register(speechPlugin, domainDeps);
  await app.register(dnsPlugin, domainDeps);
  await app.register(assistantPlugin, domainDeps);
  await app.register(ircPlugin, domainDeps);
  await app.register(consolePlugin, domainDeps); // home dashboard, /dns, /admin pages
  await app.register(dnsProvidersPage, domainDeps); // /admin/dns-providers

  attachLiveHub(app, domainDeps);
  await speech.work.start(app.log);
  app.addHook('onClose', () => speech.work.stop());

  app.decorate('deps', domainDeps);
  return app;
}

declare module 'fastify' {
  interface FastifyInstance {
    deps: DomainDeps;
  }
}
