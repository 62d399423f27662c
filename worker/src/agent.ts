import { hostname } from 'node:os';
import { status, type ServiceError } from '@grpc/grpc-js';
import { WORKER_CONTRACT_VERSION, type CapabilitiesMsg } from '@sonar/shared';
import type { CoordinatorClient } from './coordinator-client.js';

export interface AgentLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Errors after which retrying cannot help: the operator has to act. */
export class FatalAgentError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export interface AgentOptions {
  client: CoordinatorClient;
  capabilities: CapabilitiesMsg;
  agentVersion: string;
  local: boolean;
  logger: AgentLogger;
  /** Reconnect backoff bounds. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * The worker agent's connection lifecycle: Hello (contract check), heartbeats at the interval the
 * coordinator asks for, and reconnection with capped exponential backoff and jitter whenever the
 * coordinator is unreachable or has forgotten the session.
 */
export class WorkerAgent {
  private stopped = false;
  private wake: (() => void) | null = null;
  sessionId: string | null = null;

  constructor(private readonly opts: AgentOptions) {}

  /** Runs until stop(); rejects with FatalAgentError on authentication or contract refusal. */
  async run(): Promise<void> {
    const { client, logger } = this.opts;
    let attempt = 0;
    while (!this.stopped) {
      try {
        const hello = await client.hello({
          contract_version: WORKER_CONTRACT_VERSION,
          agent_version: this.opts.agentVersion,
          hostname: hostname(),
          capabilities: this.opts.capabilities,
          local: this.opts.local,
        });
        attempt = 0;
        this.sessionId = hello.session_id;
        logger.info({ worker: hello.worker_name, session: hello.session_id, models: this.opts.capabilities.models }, 'connected to coordinator');
        await this.heartbeatLoop(hello.heartbeat_interval_ms);
      } catch (err) {
        this.sessionId = null;
        const e = err as ServiceError;
        if (e.code === status.UNAUTHENTICATED) throw new FatalAgentError(`coordinator refused the worker secret: ${e.details}`, 3);
        if (e.code === status.FAILED_PRECONDITION) throw new FatalAgentError(`coordinator refused this worker: ${e.details}`, 2);
        if (this.stopped) break;
        const delay = this.backoff(attempt++);
        logger.warn({ code: e.code, details: e.details ?? String(err), retryInMs: delay }, 'coordinator unreachable; retrying');
        await this.sleep(delay);
      }
    }
  }

  private async heartbeatLoop(intervalMs: number) {
    while (!this.stopped) {
      await this.sleep(intervalMs);
      if (this.stopped) return;
      const res = await this.opts.client.heartbeat({ session_id: this.sessionId ?? '' });
      if (!res.session_valid) {
        this.opts.logger.warn({}, 'coordinator forgot this session; saying hello again');
        return;
      }
    }
  }

  private backoff(attempt: number): number {
    const min = this.opts.minBackoffMs ?? 500;
    const max = this.opts.maxBackoffMs ?? 30_000;
    const ceiling = Math.min(max, min * 2 ** attempt);
    return Math.round(ceiling / 2 + Math.random() * (ceiling / 2)); // "equal jitter"
  }

  private sleep(ms: number) {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  stop() {
    this.stopped = true;
    this.wake?.();
  }
}
