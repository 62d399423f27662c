import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Queue } from 'bullmq';
import type { Config } from '../config.js';
import { IpRangeSet } from './ip-ranges.js';
import { timingSafeEqual } from 'node:crypto';

/** Something that reports how many worker agents are connected right now. */
export interface WorkerPresenceSource {
  connectedCount(): number;
}

/**
 * Prometheus metrics of one coordinator: HTTP latency by route, BullMQ queue depths, connected
 * workers, plus the process defaults. One registry per instance, so tests can run several apps.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly queues = new Set<Queue>();
  private presence: WorkerPresenceSource | null = null;
  private speechQueue: (() => Promise<Record<string, number>>) | null = null;

  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  constructor() {
    const queues = this.queues;
    new Gauge({
      name: 'queue_jobs',
      help: 'Jobs in each BullMQ queue by state',
      labelNames: ['queue', 'state'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const queue of queues) {
          const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
          for (const [state, n] of Object.entries(counts)) this.set({ queue: queue.name, state }, n);
        }
      },
    });
    const connectedCount = () => this.presence?.connectedCount() ?? 0;
    const speechQueueCounts = () => this.speechQueue?.() ?? null;
    new Gauge({
      name: 'speech_workers_connected',
      help: 'Worker agents with a live connection to this coordinator',
      registers: [this.registry],
      collect() {
        this.set(connectedCount());
      },
    });
    new Gauge({
      name: 'speech_jobs',
      help: 'Speech jobs by status (the queue of record is PostgreSQL)',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const counts = speechQueueCounts();
        if (!counts) return;
        this.reset();
        for (const [status, n] of Object.entries(await counts)) this.set({ status }, n);
      },
    });
    collectDefaultMetrics({ register: this.registry });
  }

  setSpeechQueue(source: () => Promise<Record<string, number>>) {
    this.speechQueue = source;
  }

  trackQueue(queue: Queue) {
    this.queues.add(queue);
  }

  setWorkerPresence(source: WorkerPresenceSource) {
    this.presence = source;
  }
}

/** Records request latency and serves GET /metrics to allowed addresses or a bearer token. */
export const metricsPlugin = fp(
  async function metricsRoutes(app: FastifyInstance, opts: { config: Config; metrics: Metrics }) {
    const { config, metrics } = opts;

    app.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched';
      if (route === '/metrics') return;
      metrics.httpDuration.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1000);
    });

    if (!config.METRICS_ENABLED) return;
    const allowed = new IpRangeSet(config.METRICS_ALLOW);
    const token = config.METRICS_TOKEN ? Buffer.from(`Bearer ${config.METRICS_TOKEN}`) : null;

    // Public for the auth plugin: the handler admits METRICS_ALLOW addresses or METRICS_TOKEN itself.
    app.get('/metrics', { schema: { hide: true }, config: { auth: 'public' } }, async (request, reply) => {
      const header = Buffer.from(request.headers.authorization ?? '');
      const tokenOk = token !== null && header.length === token.length && timingSafeEqual(header, token);
      if (!tokenOk && !allowed.has(request.ip)) {
        return reply.code(403).send({ ok: false, reason: 'forbidden', message: 'Metrics are not available to this client.' });
      }
      return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    });
  },
  { name: 'sonar-metrics' },
);
